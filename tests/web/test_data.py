"""/data/: browse, upload, download, delete and make folders, with the same checks as the API."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import StreamingHttpResponse
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_alice(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def upload(client: Client, path: str, data: bytes = b"{}\n", name: str = "train.jsonl", **extra: str):
    body = {"path": path, "file": SimpleUploadedFile(name, data), **extra}
    return client.post("/data/upload/", body, follow=True)


def test_it_shows_the_home_with_spec_paths(as_alice: Client) -> None:
    response = as_alice.get("/data/")
    page = response.content.decode()
    assert response.status_code == 200
    for sub in ("jobs", "datasets", "models", "code"):
        assert f"$HOME/{sub}" in page
    assert 'name="file"' in page and 'name="overwrite"' in page
    assert '<label for="id_file">' in page and '<label class="check" for="id_overwrite">' in page
    # The home's own folders have no delete button.
    assert 'action="/data/delete/"' not in page


def test_it_shows_breadcrumbs(as_alice: Client, alice_home: Path) -> None:
    (alice_home / "datasets" / "gsm8k").mkdir()
    page = as_alice.get("/data/?path=datasets/gsm8k").content.decode()
    assert 'href="/data/?area=home&path=datasets"' in page
    assert '<strong aria-current="page">gsm8k</strong>' in page
    assert "$HOME/datasets/gsm8k" in page


def test_it_uploads_into_the_current_folder(as_alice: Client, alice_home: Path) -> None:
    response = upload(as_alice, "datasets", b"data")
    assert response.redirect_chain[-1][0] == "/data/?area=home&path=datasets"
    assert "Uploaded datasets/train.jsonl. Use it in a spec as $HOME/datasets/train.jsonl" in messages_of(response)
    assert (alice_home / "datasets" / "train.jsonl").read_bytes() == b"data"
    assert "$HOME/datasets/train.jsonl" in response.content.decode()


def test_it_asks_before_overwriting(as_alice: Client, alice_home: Path) -> None:
    upload(as_alice, "datasets", b"first")
    response = upload(as_alice, "datasets", b"second")
    assert any("already exists" in m for m in messages_of(response))
    assert (alice_home / "datasets" / "train.jsonl").read_bytes() == b"first"
    upload(as_alice, "datasets", b"second", overwrite="1")
    assert (alice_home / "datasets" / "train.jsonl").read_bytes() == b"second"


def test_it_refuses_a_file_over_the_limit(as_alice: Client, alice_home: Path, settings) -> None:
    settings.ARGUS_MAX_UPLOAD_BYTES = 4
    response = upload(as_alice, "datasets", b"12345")
    assert any("the upload limit is 4 bytes" in m for m in messages_of(response))
    assert list((alice_home / "datasets").iterdir()) == []


def test_it_refuses_a_body_over_the_limit_without_reading_it(as_alice: Client, alice_home: Path, settings) -> None:
    # The declared length is 2 GiB, the body a few bytes: the test client's payload raises if
    # anything tries to read past what was sent, so a refusal here proves nothing was read.
    settings.ARGUS_MAX_UPLOAD_BYTES = 1024 * 1024
    body = {"path": "datasets", "file": SimpleUploadedFile("big.bin", b"x")}
    response = as_alice.post("/data/upload/?area=home&path=datasets", body, CONTENT_LENGTH=str(2 * 1024**3))
    assert response.status_code == 302 and response["Location"] == "/data/?area=home&path=datasets"
    page = as_alice.get(response["Location"])
    assert any(f"the upload limit is {1024 * 1024} bytes" in m for m in messages_of(page))
    assert list((alice_home / "datasets").iterdir()) == []


def test_the_upload_form_still_needs_its_csrf_token(alice: User, alice_home: Path) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post("/data/upload/", {"path": "datasets", "file": SimpleUploadedFile("a.txt", b"x")})
    assert response.status_code == 403
    assert list((alice_home / "datasets").iterdir()) == []


def test_the_upload_form_names_its_folder_in_its_url(as_alice: Client) -> None:
    page = as_alice.get("/data/?path=datasets").content.decode()
    assert 'action="/data/upload/?area=home&amp;path=datasets"' in page


def test_it_wants_a_file(as_alice: Client) -> None:
    response = as_alice.post("/data/upload/", {"path": "datasets"}, follow=True)
    assert "Choose a file to upload." in messages_of(response)


def test_it_downloads_a_file(as_alice: Client, alice_home: Path) -> None:
    (alice_home / "models" / "notes.txt").write_text("hello\n")
    response = as_alice.get("/data/download/?path=models/notes.txt")
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    assert b"".join(response.streaming_content) == b"hello\n"
    assert "attachment" in response["Content-Disposition"]


def test_it_deletes_a_file_and_a_folder(as_alice: Client, alice_home: Path) -> None:
    (alice_home / "models" / "old.bin").write_bytes(b"x")
    (alice_home / "jobs" / "run1" / "checkpoints").mkdir(parents=True)
    response = as_alice.post("/data/delete/", {"path": "models/old.bin"}, follow=True)
    assert response.redirect_chain[-1][0] == "/data/?area=home&path=models"
    assert "Deleted models/old.bin." in messages_of(response)
    assert not (alice_home / "models" / "old.bin").exists()
    # A folder with something in it goes only when the form asks for it.
    response = as_alice.post("/data/delete/", {"path": "jobs/run1"}, follow=True)
    assert any("not empty" in m for m in messages_of(response))
    as_alice.post("/data/delete/", {"path": "jobs/run1", "recursive": "1"})
    assert not (alice_home / "jobs" / "run1").exists()


def test_the_delete_button_asks_first(as_alice: Client, alice_home: Path) -> None:
    (alice_home / "models" / "old.bin").write_bytes(b"x")
    page = as_alice.get("/data/?path=models").content.decode()
    assert 'data-confirm="Delete models/old.bin? This cannot be undone."' in page


def test_it_makes_a_folder(as_alice: Client, alice_home: Path) -> None:
    response = as_alice.post("/data/mkdir/", {"path": "datasets", "name": "gsm8k"}, follow=True)
    assert "Created the folder datasets/gsm8k." in messages_of(response)
    assert (alice_home / "datasets" / "gsm8k").is_dir()


@pytest.mark.parametrize("name", ["a/b", "..", "../../bob", "", "evil\nname\x1b[31m"])
def test_it_refuses_a_folder_name_that_is_not_plain(as_alice: Client, alice_home: Path, name: str) -> None:
    response = as_alice.post("/data/mkdir/", {"path": "datasets", "name": name}, follow=True)
    assert messages_of(response) and "Created" not in messages_of(response)[0]
    assert list((alice_home / "datasets").iterdir()) == []


@pytest.mark.parametrize("path", ["../bob/datasets", "datasets/../../bob/datasets", "/etc", "/"])
def test_it_refuses_paths_that_escape(as_alice: Client, bob_home: Path, path: str) -> None:
    response = as_alice.get("/data/", {"path": path})
    assert response.status_code == 400
    assert "secret.txt" not in response.content.decode()

    response = as_alice.get("/data/download/", {"path": f"{path}/secret.txt"}, follow=True)
    assert response.status_code == 200 and not response.get("Content-Disposition")
    assert messages_of(response)

    upload(as_alice, path)
    as_alice.post("/data/mkdir/", {"path": path, "name": "new"})
    as_alice.post("/data/delete/", {"path": f"{path}/secret.txt"})
    assert sorted(p.name for p in (bob_home / "datasets").iterdir()) == ["secret.txt"]


def test_a_link_to_another_home_leads_nowhere(as_alice: Client, alice_home: Path, bob_home: Path) -> None:
    (alice_home / "datasets" / "bobs").symlink_to(bob_home / "datasets")
    page = as_alice.get("/data/?path=datasets").content.decode()
    assert "link, not followed" in page
    assert 'href="/data/?area=home&path=datasets/bobs"' not in page

    response = as_alice.get("/data/?path=datasets/bobs")
    assert response.status_code == 400 and "secret.txt" not in response.content.decode()
    response = as_alice.get("/data/download/?path=datasets/bobs/secret.txt", follow=True)
    assert any("outside" in m for m in messages_of(response))
    upload(as_alice, "datasets/bobs")
    as_alice.post("/data/delete/", {"path": "datasets/bobs/secret.txt"})
    assert sorted(p.name for p in (bob_home / "datasets").iterdir()) == ["secret.txt"]


def test_the_shared_folders_are_read_only(as_alice: Client, shared_root: Path) -> None:
    (shared_root / "datasets" / "gsm8k").mkdir()
    (shared_root / "datasets" / "gsm8k" / "train.parquet").write_bytes(b"PAR1")
    page = as_alice.get("/data/?area=datasets&path=gsm8k").content.decode()
    assert "$HOME/common/datasets/gsm8k/train.parquet" in page
    assert "Read-only" in page and 'name="file"' not in page and "/data/delete/" not in page

    response = as_alice.get("/data/download/?area=datasets&path=gsm8k/train.parquet")
    assert isinstance(response, StreamingHttpResponse)
    assert b"".join(response.streaming_content) == b"PAR1"

    response = upload(as_alice, "gsm8k", area="datasets")
    assert any("read-only" in m for m in messages_of(response))
    response = as_alice.post("/data/delete/", {"area": "datasets", "path": "gsm8k/train.parquet"}, follow=True)
    assert any("read-only" in m for m in messages_of(response))
    as_alice.post("/data/mkdir/", {"area": "hf", "name": "x"})
    assert sorted(p.name for p in (shared_root / "datasets" / "gsm8k").iterdir()) == ["train.parquet"]
    assert list((shared_root / "hf").iterdir()) == []


def test_the_hf_cache_shows_its_spec_paths(as_alice: Client, shared_root: Path) -> None:
    (shared_root / "hf" / "hub").mkdir()
    page = as_alice.get("/data/?area=hf").content.decode()
    assert "$HOME/common/hf/hub" in page


def test_it_explains_an_unknown_area_or_missing_folder(as_alice: Client) -> None:
    response = as_alice.get("/data/?area=users")
    assert response.status_code == 400 and "Unknown area" in response.content.decode()
    response = as_alice.get("/data/?path=datasets/nope")
    assert response.status_code == 404 and "does not exist" in response.content.decode()
