"""The web UI in a real browser: Debian's Chromium through Playwright, against the live server.

The ``page`` fixture fails a test whose page sent a request anywhere but the live server, or
logged a console error; every test here is checked for both.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from accounts.homes import home_dir
from accounts.models import ApiToken
from tests.web.helpers import PASSWORD, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_signs_in_with_the_right_password_and_goes_where_it_was_asked(page: Page, alice: User) -> None:
    page.goto("/data/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/data/$"))
    shot(page, "login")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page).to_have_url(re.compile(r"/data/$"))
    expect(page.get_by_role("navigation", name="Main")).to_contain_text("alice")


def test_it_refuses_a_wrong_password_with_a_clear_message(page: Page, alice: User) -> None:
    sign_in(page, "alice", "not-the-password")
    expect(page).to_have_url(re.compile(r"/login/$"))
    expect(page.get_by_role("alert")).to_contain_text("Wrong username or password")
    expect(page.get_by_label("Username")).to_have_value("alice")
    shot(page, "login-wrong-password")


def test_it_signs_in_with_an_api_token(page: Page, alice: User) -> None:
    _, raw = ApiToken.issue(alice, "laptop")
    page.goto("/login/")
    page.get_by_label("API token").fill(raw)
    page.get_by_role("button", name="Sign in with token").click()
    expect(page).to_have_url(re.compile(r"/tasks/$"))


def test_it_signs_out(signed_in_page: Page) -> None:
    page = signed_in_page
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/login/$"))
    expect(page.get_by_role("status")).to_contain_text("signed out")
    page.goto("/account/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/account/$"))


def test_it_uploads_downloads_and_deletes_a_file(signed_in_page: Page, tmp_path: Path) -> None:
    page = signed_in_page
    local = tmp_path / "train.jsonl"
    local.write_text('{"prompt": "1+1", "answer": "2"}\n')

    page.goto("/data/")
    page.get_by_role("link", name="datasets/").click()
    expect(page).to_have_url(re.compile(r"path=datasets"))
    expect(page.locator("[data-spec-path]")).to_have_text("$HOME/datasets")
    page.get_by_label("Upload a file here").set_input_files(str(local))
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("Uploaded datasets/train.jsonl")
    row = page.locator("tr[data-entry='train.jsonl']")
    expect(row).to_contain_text("$HOME/datasets/train.jsonl")
    assert (home_dir("alice") / "datasets" / "train.jsonl").read_text() == local.read_text()
    shot(page, "data-uploaded")

    # The same name again: refused unless "overwrite" is ticked.
    local.write_text("second version\n")
    page.get_by_label("Upload a file here").set_input_files(str(local))
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("already exists")
    assert "second" not in (home_dir("alice") / "datasets" / "train.jsonl").read_text()
    page.get_by_label("Upload a file here").set_input_files(str(local))
    page.get_by_label("Overwrite if it exists").check()
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("Uploaded")
    assert (home_dir("alice") / "datasets" / "train.jsonl").read_text() == "second version\n"

    with page.expect_download() as download_info:
        row.get_by_role("button", name="Download train.jsonl").click()
    download = download_info.value
    assert download.suggested_filename == "train.jsonl"
    assert Path(download.path()).read_text() == "second version\n"

    row.get_by_role("button", name="Delete train.jsonl").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Delete datasets/train.jsonl?")
    shot(page, "data-confirm-delete")
    dialog.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("status")).to_contain_text("Deleted datasets/train.jsonl")
    expect(row).to_have_count(0)
    assert not (home_dir("alice") / "datasets" / "train.jsonl").exists()


def test_a_canceled_confirmation_deletes_nothing(signed_in_page: Page) -> None:
    page = signed_in_page
    (home_dir("alice") / "code" / "reward.py").write_text("def score(): ...\n")
    page.goto("/data/?area=home&path=code")
    page.get_by_role("button", name="Delete reward.py").click()
    page.locator("#confirm-dialog").get_by_role("button", name="Cancel").click()
    expect(page.locator("#confirm-dialog")).not_to_be_visible()
    page.reload()
    expect(page.locator("tr[data-entry='reward.py']")).to_have_count(1)


def test_it_creates_a_folder(signed_in_page: Page) -> None:
    page = signed_in_page
    page.goto("/data/?area=home&path=models")
    page.get_by_label("New folder here").fill("qwen-sft")
    page.get_by_role("button", name="Create folder").click()
    expect(page.get_by_role("status")).to_contain_text("Created the folder models/qwen-sft")
    assert (home_dir("alice") / "models" / "qwen-sft").is_dir()


def test_the_shared_folders_are_read_only(signed_in_page: Page, shared_root: Path) -> None:
    page = signed_in_page
    (shared_root / "datasets" / "gsm8k").mkdir()
    (shared_root / "datasets" / "gsm8k" / "train.parquet").write_bytes(b"PAR1")
    page.goto("/data/")
    page.get_by_role("link", name=re.compile("Shared datasets")).click()
    page.get_by_role("link", name="gsm8k/").click()
    row = page.locator("tr[data-entry='train.parquet']")
    expect(row).to_contain_text("$HOME/common/datasets/gsm8k/train.parquet")
    expect(page.get_by_text("Read-only", exact=True)).to_be_visible()
    expect(page.get_by_label("Upload a file here")).to_have_count(0)
    expect(row.get_by_role("button", name=re.compile("Delete"))).to_have_count(0)
    shot(page, "data-shared")
    with page.expect_download() as download_info:
        row.get_by_role("button", name="Download train.parquet").click()
    assert Path(download_info.value.path()).read_bytes() == b"PAR1"


def test_it_creates_a_token_shows_it_once_and_revokes_it(signed_in_page: Page) -> None:
    page = signed_in_page
    page.goto("/account/")
    page.get_by_label("Name", exact=True).fill("laptop")  # the token's (a secret has one too)
    page.get_by_label("Expires").select_option(label="In 30 days")
    page.get_by_role("button", name="Create token").click()
    raw = page.locator("[data-token]").inner_text()
    assert raw.startswith("argus_")
    token = ApiToken.objects.get(user__username="alice", name="laptop")
    assert raw.startswith(token.prefix) and token.expires_at is not None
    row = page.locator(f"tr[data-token-row='{token.pk}']")
    expect(row).to_contain_text("Active")
    shot(page, "account-new-token")

    page.reload()
    expect(page.locator("[data-token]")).to_have_count(0)
    assert raw not in page.content()

    row.get_by_role("button", name="Revoke token laptop").click()
    expect(page.locator("#confirm-dialog")).to_contain_text("Revoke the token “laptop”")
    page.locator("#confirm-dialog").get_by_role("button", name="Revoke").click()
    expect(page.get_by_role("status")).to_contain_text("revoked")
    expect(row).to_contain_text("Revoked")
    token.refresh_from_db()
    assert token.revoked_at is not None
    shot(page, "account")


# Every page a signed-in user can reach, by the name its screenshot gets.
PAGES = {
    "tasks": "/tasks/",
    "task-new": "/tasks/new/",
    "pipelines": "/pipelines/",
    "queue": "/queue/",
    "cluster": "/cluster/",
    "data-home": "/data/",
    "data-datasets": "/data/?area=datasets",
    "data-hf": "/data/?area=hf",
    "account-page": "/account/",
}


@pytest.mark.parametrize("name", PAGES)
def test_every_page_renders_cleanly(signed_in_page: Page, name: str) -> None:
    page = signed_in_page
    response = page.goto(PAGES[name])
    assert response is not None and response.status == 200
    expect(page.locator("h1")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    shot(page, name)


def test_the_nav_shows_admin_and_the_api_docs_to_staff(page: Page, admin: User) -> None:
    sign_in(page, "admin")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Admin")).to_be_visible()
    nav.get_by_role("link", name="API docs").click()
    expect(page.locator(".swagger-ui")).to_be_visible()
    expect(page.get_by_text("/api/v2/files", exact=True).first).to_be_visible()
    page.goto("/admin/")
    expect(page.locator("#site-name")).to_be_visible()


def test_the_nav_has_no_admin_link_for_others(signed_in_page: Page) -> None:
    nav = signed_in_page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Admin")).to_have_count(0)


def test_the_keyboard_reaches_the_content_first(signed_in_page: Page) -> None:
    page = signed_in_page
    page.goto("/data/")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
