"""/api/v2/files: list, upload, download, delete and mkdir, with every path check."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import StreamingHttpResponse
from rest_framework.test import APIClient

from tests.accounts.helpers import assert_error

pytestmark = pytest.mark.django_db

FILES = "/api/v2/files"


@pytest.fixture
def api(client_for: Callable[[User | None], APIClient], alice: User) -> APIClient:
    return client_for(alice)


def upload(api: APIClient, path: str, name: str = "train.jsonl", data: bytes = b"{}\n", **extra: str):
    body = {"file": SimpleUploadedFile(name, data), **extra}
    return api.post(f"{FILES}?path={path}", body, format="multipart")


def names(response) -> list[str]:
    return [entry["name"] for entry in response.json()["entries"]]


# --- listing -------------------------------------------------------------------------------


def test_it_lists_the_home_with_spec_paths(api: APIClient) -> None:
    response = api.get(FILES)
    assert response.status_code == 200
    body = response.json()
    assert body["area"] == "home" and body["path"] == "" and body["writable"] is True
    assert body["spec_path"] == "$HOME"
    assert names(response) == ["code", "datasets", "jobs", "models"]
    first = body["entries"][0]
    assert first["type"] == "dir" and first["path"] == "code" and first["spec_path"] == "$HOME/code"


def test_it_lists_folders_first_then_files(api: APIClient, alice_home: Path) -> None:
    (alice_home / "datasets" / "b.txt").write_text("b")
    (alice_home / "datasets" / "a.txt").write_text("a")
    (alice_home / "datasets" / "zoo").mkdir()
    response = api.get(FILES, {"path": "datasets"})
    assert names(response) == ["zoo", "a.txt", "b.txt"]
    entry = response.json()["entries"][1]
    assert entry["size"] == 1 and entry["spec_path"] == "$HOME/datasets/a.txt"


def test_it_requires_a_token(client_for: Callable[[User | None], APIClient]) -> None:
    assert_error(client_for(None).get(FILES), 401)


def test_it_answers_404_for_a_missing_folder(api: APIClient) -> None:
    assert_error(api.get(FILES, {"path": "datasets/nope"}), 404, "does not exist", fields=("path",))


def test_it_refuses_to_list_a_file(api: APIClient, alice_home: Path) -> None:
    (alice_home / "code" / "reward.py").write_text("")
    # 409: the path is well formed; what is there is the wrong kind (the schema's 400 is for bad input).
    assert_error(api.get(FILES, {"path": "code/reward.py"}), 409, "not a folder", fields=("path",))


def test_it_refuses_an_unknown_area(api: APIClient) -> None:
    assert_error(api.get(FILES, {"area": "users"}), 400, fields=("area",))


# --- upload --------------------------------------------------------------------------------


def test_it_uploads_into_a_folder(api: APIClient, alice_home: Path) -> None:
    response = upload(api, "datasets", data=b'{"a": 1}\n')
    assert response.status_code == 201, response.content
    assert response.json() == {
        "area": "home",
        "path": "datasets/train.jsonl",
        "spec_path": "$HOME/datasets/train.jsonl",
    }
    saved = alice_home / "datasets" / "train.jsonl"
    assert saved.read_bytes() == b'{"a": 1}\n'
    assert saved.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in (alice_home / "datasets").iterdir()] == ["train.jsonl"]  # no temp file


def test_it_uploads_under_another_name(api: APIClient, alice_home: Path) -> None:
    response = api.post(f"{FILES}?path=code", {"file": SimpleUploadedFile("x.py", b"pass\n"), "name": "reward.py"})
    assert response.status_code == 201
    assert (alice_home / "code" / "reward.py").read_text() == "pass\n"


def test_it_accepts_an_empty_file(api: APIClient, alice_home: Path) -> None:
    assert upload(api, "code", name="__init__.py", data=b"").status_code == 201
    assert (alice_home / "code" / "__init__.py").read_bytes() == b""


def test_it_refuses_to_overwrite_unless_asked(api: APIClient, alice_home: Path) -> None:
    upload(api, "datasets", data=b"first")
    assert_error(upload(api, "datasets", data=b"second"), 409, "already exists", fields=("file",))
    assert (alice_home / "datasets" / "train.jsonl").read_bytes() == b"first"

    assert (
        api.post(
            f"{FILES}?path=datasets&overwrite=1", {"file": SimpleUploadedFile("train.jsonl", b"second")}
        ).status_code
        == 201
    )
    assert (alice_home / "datasets" / "train.jsonl").read_bytes() == b"second"
    # overwrite in the body works too
    assert upload(api, "datasets", data=b"third", overwrite="1").status_code == 201
    assert (alice_home / "datasets" / "train.jsonl").read_bytes() == b"third"


def test_it_never_replaces_a_folder_with_a_file(api: APIClient, alice_home: Path) -> None:
    (alice_home / "datasets" / "train.jsonl").mkdir()
    response = upload(api, "datasets", overwrite="1")
    assert_error(response, 409, "is a folder", fields=("file",))
    assert (alice_home / "datasets" / "train.jsonl").is_dir()


def test_it_refuses_a_file_over_the_limit(api: APIClient, alice_home: Path, settings) -> None:
    settings.ARGUS_MAX_UPLOAD_BYTES = 10
    assert_error(upload(api, "datasets", data=b"x" * 11), 413, "limit is 10 bytes", fields=("file",))
    assert list((alice_home / "datasets").iterdir()) == []
    assert upload(api, "datasets", data=b"x" * 10).status_code == 201


def test_it_refuses_a_body_over_the_limit_before_reading_it(api: APIClient, settings) -> None:
    settings.ARGUS_MAX_UPLOAD_BYTES = 10
    assert_error(upload(api, "datasets", data=b"x" * 200_000), 413, fields=("file",))


def test_it_wants_a_file(api: APIClient) -> None:
    assert_error(api.post(f"{FILES}?path=datasets", {"name": "x"}), 400, fields=("file",))


def test_it_wants_multipart(api: APIClient) -> None:
    assert_error(api.post(f"{FILES}?path=datasets", {"file": "x"}, format="json"), 415)


@pytest.mark.parametrize("name", ["../escape.txt", "a/b.txt", "..", "."])
def test_it_refuses_a_name_that_is_not_plain(api: APIClient, alice_home: Path, name: str) -> None:
    response = api.post(f"{FILES}?path=datasets", {"file": SimpleUploadedFile("ok.txt", b"x"), "name": name})
    assert_error(response, 400, fields=("name",))
    assert list((alice_home / "datasets").iterdir()) == []


def test_it_refuses_a_bad_boolean(api: APIClient) -> None:
    assert_error(upload(api, "datasets", overwrite="perhaps"), 400, fields=("overwrite",))


# --- download ------------------------------------------------------------------------------


def test_it_downloads_a_file(api: APIClient, alice_home: Path) -> None:
    (alice_home / "models" / "notes.txt").write_text("hello\n")
    response = api.get(f"{FILES}/download", {"path": "models/notes.txt"})
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    assert b"".join(response.streaming_content) == b"hello\n"
    assert 'attachment; filename="notes.txt"' in response["Content-Disposition"]


def test_it_does_not_download_a_folder(api: APIClient) -> None:
    assert_error(api.get(f"{FILES}/download", {"path": "models"}), 409, "folder", fields=("path",))


def test_it_answers_404_for_a_missing_file(api: APIClient) -> None:
    assert_error(api.get(f"{FILES}/download", {"path": "models/nope.bin"}), 404, fields=("path",))


# --- delete and mkdir ----------------------------------------------------------------------


def test_it_deletes_a_file(api: APIClient, alice_home: Path) -> None:
    (alice_home / "models" / "old.bin").write_bytes(b"x")
    assert api.delete(f"{FILES}?path=models/old.bin").status_code == 204
    assert not (alice_home / "models" / "old.bin").exists()
    assert_error(api.delete(f"{FILES}?path=models/old.bin"), 404)


def test_it_deletes_a_folder_only_when_empty_or_asked(api: APIClient, alice_home: Path) -> None:
    run = alice_home / "jobs" / "run1"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "step1.pt").write_bytes(b"x")
    assert_error(api.delete(f"{FILES}?path=jobs/run1"), 409, "not empty", fields=("path",))
    assert run.exists()
    assert api.delete(f"{FILES}?path=jobs/run1&recursive=1").status_code == 204
    assert not run.exists()
    (alice_home / "jobs" / "empty").mkdir()
    assert api.delete(f"{FILES}?path=jobs/empty").status_code == 204


@pytest.mark.parametrize("path", ["", "jobs", "datasets/", "./code"])
def test_it_never_deletes_the_home_or_its_top_folders(api: APIClient, alice_home: Path, path: str) -> None:
    response = api.delete(f"{FILES}?path={path}&recursive=1")
    assert response.status_code in (400, 403)
    assert all((alice_home / sub).is_dir() for sub in ("jobs", "datasets", "models", "code"))


def test_it_makes_a_folder_with_parents(api: APIClient, alice_home: Path) -> None:
    response = api.post(f"{FILES}/mkdir?path=datasets/gsm8k/v2")
    assert response.status_code == 201
    assert response.json()["spec_path"] == "$HOME/datasets/gsm8k/v2"
    assert (alice_home / "datasets" / "gsm8k" / "v2").is_dir()
    assert_error(api.post(f"{FILES}/mkdir?path=datasets/gsm8k"), 409, "already exists")


# --- escapes -------------------------------------------------------------------------------

ESCAPES = [
    "../bob/datasets",
    "datasets/../../bob/datasets",
    "..",
    "/etc",
    "/",
    "jobs/\x00x",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_it_refuses_paths_that_escape_on_every_route(api: APIClient, bob_home: Path, path: str) -> None:
    assert_error(api.get(FILES, {"path": path}), 400, fields=("path",))
    assert_error(api.get(f"{FILES}/download", {"path": f"{path}/secret.txt"}), 400, fields=("path",))
    folder = {"path": path}
    response = api.post(FILES + "?" + urlencode(folder), {"file": SimpleUploadedFile("x.txt", b"x")})
    assert_error(response, 400, fields=("path",))
    assert_error(api.delete(FILES + "?" + urlencode({"path": f"{path}/secret.txt"})), 400, fields=("path",))
    assert_error(api.post(f"{FILES}/mkdir?" + urlencode({"path": f"{path}/new"})), 400, fields=("path",))
    assert (bob_home / "datasets" / "secret.txt").exists()
    assert not (bob_home / "datasets" / "x.txt").exists()


def test_another_user_never_sees_alices_files(
    client_for: Callable[[User | None], APIClient], alice_home: Path, bob: User
) -> None:
    (alice_home / "datasets" / "private.txt").write_text("alice only")
    as_bob = client_for(bob)
    assert "private.txt" not in names(as_bob.get(FILES, {"path": "datasets"}))
    assert_error(as_bob.get(f"{FILES}/download", {"path": "datasets/private.txt"}), 404)
    assert_error(as_bob.delete(f"{FILES}?path=datasets/private.txt"), 404)
    assert (alice_home / "datasets" / "private.txt").exists()


def test_a_link_to_another_home_is_not_followed(api: APIClient, alice_home: Path, bob_home: Path) -> None:
    (alice_home / "datasets" / "bobs").symlink_to(bob_home / "datasets")
    listing = api.get(FILES, {"path": "datasets"}).json()
    assert listing["entries"] == [
        {
            "name": "bobs",
            "path": "datasets/bobs",
            "type": "link",
            "is_link": True,
            "size": None,
            "modified": None,
            "spec_path": "$HOME/datasets/bobs",
        }
    ]
    assert_error(api.get(FILES, {"path": "datasets/bobs"}), 400, "outside", fields=("path",))
    response = api.get(f"{FILES}/download", {"path": "datasets/bobs/secret.txt"})
    assert_error(response, 400, "outside", fields=("path",))
    assert_error(upload(api, "datasets/bobs"), 400, fields=("path",))
    assert_error(api.delete(f"{FILES}?path=datasets/bobs/secret.txt"), 400, fields=("path",))
    assert_error(api.post(f"{FILES}/mkdir?path=datasets/bobs/new"), 400, fields=("path",))
    assert (bob_home / "datasets" / "secret.txt").read_text() == "bob's secret\n"
    assert sorted(p.name for p in (bob_home / "datasets").iterdir()) == ["secret.txt"]


def test_a_link_to_a_file_elsewhere_is_not_downloaded(api: APIClient, alice_home: Path, bob_home: Path) -> None:
    (alice_home / "models" / "passwd").symlink_to("/etc/passwd")
    (alice_home / "models" / "secret").symlink_to(bob_home / "datasets" / "secret.txt")
    for name in ("passwd", "secret"):
        assert_error(api.get(f"{FILES}/download", {"path": f"models/{name}"}), 400, "outside")


def test_deleting_a_link_removes_the_link_not_its_target(api: APIClient, alice_home: Path, bob_home: Path) -> None:
    (alice_home / "datasets" / "bobs").symlink_to(bob_home / "datasets")
    assert api.delete(f"{FILES}?path=datasets/bobs&recursive=1").status_code == 204
    assert not os.path.lexists(alice_home / "datasets" / "bobs")
    assert (bob_home / "datasets" / "secret.txt").exists()


def test_an_upload_over_a_link_replaces_the_link_not_its_target(
    api: APIClient, alice_home: Path, bob_home: Path
) -> None:
    (alice_home / "datasets" / "train.jsonl").symlink_to(bob_home / "datasets" / "secret.txt")
    assert_error(upload(api, "datasets", data=b"mine"), 409)
    assert upload(api, "datasets", data=b"mine", overwrite="1").status_code == 201
    assert not (alice_home / "datasets" / "train.jsonl").is_symlink()
    assert (alice_home / "datasets" / "train.jsonl").read_bytes() == b"mine"
    assert (bob_home / "datasets" / "secret.txt").read_text() == "bob's secret\n"


def test_a_link_inside_the_home_is_followed(api: APIClient, alice_home: Path) -> None:
    (alice_home / "models" / "run1").mkdir()
    (alice_home / "models" / "run1" / "config.json").write_text("{}")
    (alice_home / "models" / "latest").symlink_to(alice_home / "models" / "run1")
    entries = {e["name"]: e for e in api.get(FILES, {"path": "models"}).json()["entries"]}
    assert entries["latest"]["type"] == "dir" and entries["latest"]["is_link"] is True
    assert names(api.get(FILES, {"path": "models/latest"})) == ["config.json"]
    assert upload(api, "models/latest", name="more.txt").status_code == 201
    assert (alice_home / "models" / "run1" / "more.txt").exists()


# --- the shared folders ----------------------------------------------------------------------


@pytest.fixture
def gsm8k(shared_root: Path) -> Path:
    folder = shared_root / "datasets" / "gsm8k"
    folder.mkdir()
    (folder / "train.parquet").write_bytes(b"PAR1")
    return folder


def test_the_shared_folders_are_listed_and_downloadable(api: APIClient, gsm8k: Path, shared_root: Path) -> None:
    (shared_root / "hf" / "hub").mkdir()
    body = api.get(FILES, {"area": "datasets", "path": "gsm8k"}).json()
    assert body["writable"] is False and body["spec_path"] == "$HOME/common/datasets/gsm8k"
    assert body["entries"][0]["spec_path"] == "$HOME/common/datasets/gsm8k/train.parquet"
    hf = api.get(FILES, {"area": "hf"}).json()
    assert hf["entries"][0]["spec_path"] == "$HOME/common/hf/hub"
    response = api.get(f"{FILES}/download", {"area": "datasets", "path": "gsm8k/train.parquet"})
    assert isinstance(response, StreamingHttpResponse)
    assert b"".join(response.streaming_content) == b"PAR1"


def test_the_shared_folders_are_never_written(api: APIClient, gsm8k: Path) -> None:
    response = api.post(f"{FILES}?area=datasets&path=gsm8k", {"file": SimpleUploadedFile("x.txt", b"x")})
    assert_error(response, 403, "read-only", fields=("path",))
    assert_error(api.delete(f"{FILES}?area=datasets&path=gsm8k/train.parquet"), 403, "read-only")
    assert_error(api.delete(f"{FILES}?area=datasets&path=gsm8k&recursive=1"), 403, "read-only")
    assert_error(api.post(f"{FILES}/mkdir?area=hf&path=new"), 403, "read-only")
    assert sorted(p.name for p in gsm8k.iterdir()) == ["train.parquet"]


def test_a_home_link_to_a_shared_folder_reads_but_never_writes(api: APIClient, alice_home: Path, gsm8k: Path) -> None:
    (alice_home / "datasets" / "gsm8k").symlink_to(gsm8k)
    assert names(api.get(FILES, {"path": "datasets/gsm8k"})) == ["train.parquet"]
    response = api.get(f"{FILES}/download", {"path": "datasets/gsm8k/train.parquet"})
    assert response.status_code == 200
    assert_error(upload(api, "datasets/gsm8k"), 403, "read-only")
    assert_error(api.delete(f"{FILES}?path=datasets/gsm8k/train.parquet"), 403, "read-only")
    assert (gsm8k / "train.parquet").exists()


def test_a_shared_link_to_a_home_is_not_followed(
    client_for: Callable[[User | None], APIClient], alice: User, bob_home: Path, shared_root: Path
) -> None:
    (shared_root / "datasets" / "leak").symlink_to(bob_home / "datasets")
    response = client_for(alice).get(FILES, {"area": "datasets", "path": "leak"})
    assert_error(response, 400, "outside")


# --- the schema ------------------------------------------------------------------------------


def test_the_schema_describes_the_files_routes(api: APIClient) -> None:
    schema = api.get("/api/schema/", {"format": "json"}).json()
    files = schema["paths"]["/api/v2/files"]
    assert set(files) >= {"get", "post", "delete"}
    assert "multipart/form-data" in files["post"]["requestBody"]["content"]
    assert {p["name"] for p in files["post"]["parameters"]} >= {"path", "area", "overwrite"}
    assert {"201", "403", "409", "413"} <= set(files["post"]["responses"])
    assert {p["name"] for p in files["delete"]["parameters"]} >= {"path", "recursive"}
    download = schema["paths"]["/api/v2/files/download"]["get"]
    assert "application/octet-stream" in download["responses"]["200"]["content"]
    assert "/api/v2/files/mkdir" in schema["paths"]


# --- what the storage itself refuses ----------------------------------------------------------


def test_a_path_through_a_file_is_an_error_not_a_crash(api: APIClient, alice_home: Path) -> None:
    (alice_home / "code" / "reward.py").write_text("")
    assert_error(api.get(FILES, {"path": "code/reward.py/x"}), 404, fields=("path",))
    assert_error(api.delete(f"{FILES}?path=code/reward.py/x"), 409, "is a file", fields=("path",))
    assert_error(api.post(f"{FILES}/mkdir?path=code/reward.py/x"), 409, "is a file", fields=("path",))
    assert_error(upload(api, "code/reward.py"), 409, "not a folder", fields=("path",))


@pytest.mark.parametrize("path", ["evil\nname\x1b[31m", "models/a\tb", "models/ok/\x7fdel/x"])
def test_mkdir_follows_the_upload_name_rules(api: APIClient, alice_home: Path, path: str) -> None:
    response = api.post(f"{FILES}/mkdir?" + urlencode({"path": path}))
    assert_error(response, 400, "control characters", fields=("path",))
    assert sorted(p.name for p in alice_home.rglob("*")) == sorted(p.name for p in alice_home.glob("*"))


def test_a_name_too_long_for_the_storage_is_refused(api: APIClient) -> None:
    assert_error(api.post(f"{FILES}/mkdir?path=models/{'x' * 300}"), 400, "longer than", fields=("path",))
    # Nothing can have such a name: reading it is a 404 (the schema cannot say bytes per name).
    assert_error(api.get(FILES, {"path": f"models/{'x' * 300}"}), 404, "longer than", fields=("path",))


def test_the_storage_refusing_access_is_a_403(api: APIClient, alice_home: Path, monkeypatch) -> None:
    # Files a job wrote as another Unix user; the tests run as root, so the refusal is simulated.
    (alice_home / "jobs" / "out.log").write_text("x")

    def refuse(path: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "unlink", refuse)
    assert_error(api.delete(f"{FILES}?path=jobs/out.log"), 403, "permission denied", fields=("path",))
