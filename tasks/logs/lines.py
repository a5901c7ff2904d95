"""The one reading of a driver log's lines: what Ray and terminals add to what the program wrote.

Ray prefixes what actors print ("(TaskRunnerV1 pid=7706) ", "(WorkerDict pid=9, ip=10.0.0.2) ",
"(autoscaler +24s) "), colours the prefixes, and folds repeated lines into "[repeated 7x across
cluster]"; progress bars rewrite a line with a carriage return. Pure: strings in, strings out.
"""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ACTOR_PREFIX = re.compile(r"^\((?:[^()]|\([^()]*\))*\) ?")
REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]")
# verl's console logger, one line per logged step: "step:N - key:value - key:value" (verl's
# utils/logger concat_dict_to_str), after a Ray prefix, a log record's words or a blank where one
# is printed inside another line. The one pattern: the curves and the driver-log reader both read it.
METRIC_LINE = re.compile(r"(?:^|[\s)])step:(?P<step>\d+)\s+-\s+(?P<rest>.+)$")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def clean_lines(text: str, *, keep_indent: bool = False) -> list[str]:
    """The lines as the program wrote them: no colour codes, no Ray prefix, no repeat marker, no
    trailing blanks; a carriage return ends a line. ``keep_indent`` leaves leading blanks (a
    traceback's frames are indented, the exception that closes it is not)."""
    text = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n")
    lines = [REPEATED.sub("", ACTOR_PREFIX.sub("", line)).rstrip() for line in text.split("\n")]
    return lines if keep_indent else [line.lstrip() for line in lines]
