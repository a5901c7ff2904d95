"""Web pages of the accounts app: sign in and out, the account's API tokens and secrets, and the data page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login, logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from accounts import files
from accounts.api.serializers import SecretSetSerializer
from accounts.diskusage.quota import quota_refusal
from accounts.diskusage.usage import own_usage
from accounts.groups.rules import group_of
from accounts.homes import HOME_SUBDIRS, home_dir
from accounts.limits import may_use_high_priority, own_limits
from accounts.middleware import SESSION_TOKEN_KEY
from accounts.models import ApiToken, Secret, hash_token
from accounts.secrets import NAME_MAX, NAME_PATTERN, VALUE_MAX_BYTES, SecretsUnavailable
from accounts.sshkeys.models import SshKey
from accounts.users import request_user
from common.pages import report_errors

# A token just created travels to the one page view that shows it in a short-lived, signed,
# HttpOnly cookie scoped to /account/: the browser that asked for it holds it for one redirect,
# and the server never stores it (not even in a session row).
NEW_TOKEN_COOKIE = "argus_new_token"
NEW_TOKEN_COOKIE_MAX_AGE = 120
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class PasswordLoginForm(AuthenticationForm):
    error_messages = {
        "invalid_login": "Wrong username or password (both are case-sensitive).",
        "inactive": "This account is disabled. Ask an administrator to enable it.",
    }

    def clean(self) -> dict[str, Any]:
        try:
            return super().clean()
        except ValidationError:
            # ModelBackend refuses a disabled user exactly like a wrong password; whoever
            # knows the password deserves the real reason.
            username, password = self.cleaned_data.get("username"), self.cleaned_data.get("password")
            user = get_user_model()._default_manager.filter(username=username).first()
            if user is not None and not user.is_active and user.check_password(password):
                raise ValidationError(self.error_messages["inactive"], code="inactive") from None
            raise


class TokenLoginForm(forms.Form):
    token = forms.CharField(
        label="API token",
        widget=forms.PasswordInput(attrs={"autocomplete": "off", "placeholder": "argus_…"}),
    )

    def clean_token(self) -> str:
        raw = str(self.cleaned_data["token"])
        token = ApiToken.objects.select_related("user").filter(token_hash=hash_token(raw)).first()
        # The same refusals, in the same order, as the API's BearerTokenAuthentication.
        if token is None:
            raise ValidationError("This token is not valid.")
        if token.revoked_at is not None:
            raise ValidationError("This token has been revoked.")
        if not token.user.is_active:
            raise ValidationError("This account is disabled. Ask an administrator to enable it.")
        if not token.is_active:
            raise ValidationError("This token has expired.")
        self.api_token = token
        return raw


class TokenCreateForm(forms.Form):
    EXPIRY_CHOICES = [("", "Never"), ("7", "In 7 days"), ("30", "In 30 days"), ("90", "In 90 days")]

    name = forms.CharField(
        max_length=100, label="Name", help_text="What it is for, so you can tell it apart: laptop, CI…"
    )
    expires_days = forms.TypedChoiceField(
        choices=EXPIRY_CHOICES, coerce=int, empty_value=None, required=False, label="Expires"
    )


def _next_url(request: HttpRequest) -> str:
    candidate = request.POST.get("next") or request.GET.get("next") or ""
    safe = url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return candidate if safe else settings.LOGIN_REDIRECT_URL


@sensitive_post_parameters("password", "token")
@never_cache
def login_view(request: HttpRequest) -> HttpResponse:
    next_url = _next_url(request)
    if request.user.is_authenticated:
        return redirect(next_url)
    password_form = PasswordLoginForm(request)
    token_form = TokenLoginForm()
    if request.method == "POST":
        # Two forms on one page: the token form is the one that sends `token`.
        if "token" in request.POST:
            token_form = TokenLoginForm(request.POST)
            if token_form.is_valid():
                token_form.api_token.touch()
                login(request, token_form.api_token.user, backend=MODEL_BACKEND)
                # Set after login(), which starts a fresh session: the session ends with the token.
                request.session[SESSION_TOKEN_KEY] = token_form.api_token.pk
                return redirect(next_url)
        else:
            password_form = PasswordLoginForm(request, data=request.POST)
            if password_form.is_valid():
                login(request, password_form.get_user())
                return redirect(next_url)
    return render_login(request, password_form, token_form)


def render_login(
    request: HttpRequest,
    password_form: PasswordLoginForm | None = None,
    token_form: TokenLoginForm | None = None,
    *,
    lockout: str = "",
    status: int = 200,
) -> HttpResponse:
    """The sign-in page; ``lockout`` says why a password sign-in is refused (accounts.throttle)."""
    context = {
        "password_form": password_form or PasswordLoginForm(request),
        "token_form": token_form or TokenLoginForm(),
        "next": _next_url(request),
        "lockout": lockout,
    }
    return render(request, "accounts/login.html", context, status=status)


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    logout(request)
    messages.info(request, "You are signed out.")
    return redirect(settings.LOGIN_URL)


@never_cache  # the page can hold a raw token: no copy in any cache or in the back button
@login_required
def account_view(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    form = TokenCreateForm()
    if request.method == "POST":
        form = TokenCreateForm(request.POST)
        if form.is_valid():
            days = form.cleaned_data["expires_days"]
            expires_at = timezone.now() + timedelta(days=days) if days else None
            token, issued = ApiToken.issue(user, form.cleaned_data["name"], expires_at=expires_at)
            messages.success(request, f"Token “{token.name}” created.")
            created = redirect("web:account")
            created.set_signed_cookie(
                NEW_TOKEN_COOKIE,
                issued,
                salt=NEW_TOKEN_COOKIE,
                max_age=NEW_TOKEN_COOKIE_MAX_AGE,
                path="/account/",
                secure=request.is_secure(),
                httponly=True,
                samesite="Strict",
            )
            return created
    raw: str | None = request.get_signed_cookie(
        NEW_TOKEN_COOKIE, default=None, salt=NEW_TOKEN_COOKIE, max_age=NEW_TOKEN_COOKIE_MAX_AGE
    )
    # Only a token of this user: a cookie left behind by another account shows nothing.
    if raw and not ApiToken.objects.filter(user=user, token_hash=hash_token(raw)).exists():
        raw = None
    context = {
        "form": form,
        "tokens": ApiToken.objects.filter(user=user),
        "new_token": raw,
        "home": home_dir(user.username),
        "can_use_high_priority": may_use_high_priority(user),
        "group": group_of(user),
        "disk_usage": own_usage(user),
        "disk_quota": limits_row.disk_quota_bytes if (limits_row := own_limits(user)) else None,
        "disk_refusal": quota_refusal(user),
        "secrets": Secret.objects.filter(user=user).order_by("name"),
        "secret_name_pattern": NAME_PATTERN,
        "secret_name_max": NAME_MAX,
        "secret_value_max": VALUE_MAX_BYTES,
        "ssh_keys": SshKey.objects.filter(user=user),
        "sftp_port": settings.ARGUS_SFTP_PORT,
        # The host this page was reached by, without the web port: SFTP is on the same host.
        "sftp_host": urlsplit("//" + request.get_host()).hostname,
    }
    response = render(request, "accounts/account.html", context, status=400 if form.errors else 200)
    response.delete_cookie(NEW_TOKEN_COOKIE, path="/account/", samesite="Strict")
    return response


@login_required
@require_POST
def revoke_token_view(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    if token.revoke():
        messages.success(request, f"Token “{token.name}” ({token.prefix}…) is revoked; it no longer works.")
    else:
        messages.info(request, f"Token “{token.name}” was already revoked.")
    return redirect("web:account")


def _locate(request: HttpRequest, params: QueryDict) -> files.Location:
    return files.locate(request.user.username, params.get("path", ""), params.get("area", files.HOME))


def _data_url(area: str, rel: str) -> str:
    query = {"area": area, "path": rel} if rel else {"area": area}
    return "/data/?" + urlencode(query)


def _back_to_folder(params: QueryDict, *, parent: bool = False) -> HttpResponseRedirect:
    """Redirect to the folder a form was sent from (or, ``parent``, the one above a path)."""
    area = params.get("area", files.HOME)
    area = area if area in files.AREAS else files.HOME
    try:
        parts = files.split_path(params.get("path", ""))
    except files.FileAreaError:
        parts = ()
    return redirect(_data_url(area, "/".join(parts[:-1] if parent else parts)))


@login_required
def data_view(request: HttpRequest) -> HttpResponse:
    context: dict[str, object] = {
        "areas": [(key, files.AREA_LABELS[key], files.SPEC_PREFIXES[key]) for key in files.AREAS],
        "max_upload_bytes": files.max_upload_bytes(),
    }
    try:
        location = _locate(request, request.GET)
        context.update(location=location, listing=files.list_folder(location))
    except files.FileAreaError as error:
        context.update(error=error, area=request.GET.get("area", files.HOME))
        status = 404 if isinstance(error, files.NotFound) else 400
        return render(request, "accounts/data.html", context, status=status)
    # The home's own top folders cannot be deleted (files.delete refuses): offer no button.
    context["protected"] = HOME_SUBDIRS if location.area == files.HOME and not location.parts else ()
    context["area"] = location.area
    # The upload form repeats its folder in the URL: an upload refused for its size is refused
    # unread, and its body is where the form's fields are.
    context["folder_query"] = urlencode({"area": location.area, "path": location.rel})
    return render(request, "accounts/data.html", context)


@login_required
def data_download_view(request: HttpRequest) -> HttpResponseBase:
    try:
        location = _locate(request, request.GET)
        handle = files.open_file(location)
    except files.FileAreaError as error:
        messages.error(request, error.message)
        return _back_to_folder(request.GET, parent=True)
    return FileResponse(handle, as_attachment=True, filename=location.name)


# CSRF is checked by csrf_protect below, after the size: the middleware would read the whole
# body (request.POST) first, writing gigabytes to a temporary file before the view refuses them.
@csrf_exempt
@login_required
@require_POST
def data_upload_view(request: HttpRequest) -> HttpResponse:
    try:
        files.check_upload_length(request.META.get("CONTENT_LENGTH"))
    except files.TooLarge as error:
        messages.error(request, error.message)
        return _back_to_folder(request.GET)
    return _save_upload(request)


@csrf_protect
def _save_upload(request: HttpRequest) -> HttpResponse:
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose a file to upload.")
        return _back_to_folder(request.POST)
    try:
        folder = _locate(request, request.POST)
        saved = files.save_upload(folder, upload, overwrite=bool(request.POST.get("overwrite")))
    except files.FileAreaError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Uploaded {saved.rel}. Use it in a spec as {saved.spec_path}")
    return _back_to_folder(request.POST)


@login_required
@require_POST
def data_mkdir_view(request: HttpRequest) -> HttpResponse:
    try:
        folder = _locate(request, request.POST).child(request.POST.get("name", "").strip())
        files.make_folder(folder)
    except files.FileAreaError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Created the folder {folder.rel}.")
    return _back_to_folder(request.POST)


@login_required
@require_POST
def data_delete_view(request: HttpRequest) -> HttpResponse:
    try:
        location = _locate(request, request.POST)
        files.delete(location, recursive=bool(request.POST.get("recursive")))
    except files.FileAreaError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Deleted {location.rel}.")
    return _back_to_folder(request.POST, parent=True)


@sensitive_post_parameters("value")  # never in an error report
@login_required
@require_POST
def secret_set_view(request: HttpRequest) -> HttpResponse:
    # The API's serializer: one set of rules for the page and the API.
    serializer = SecretSetSerializer(
        data={"name": request.POST.get("name", ""), "value": request.POST.get("value", "")}
    )
    if not serializer.is_valid():
        report_errors(request, serializer.errors)
        return redirect("/account/#secrets")
    try:
        secret, created = Secret.put(request_user(request), **serializer.validated_data)
    except SecretsUnavailable as error:
        messages.error(request, str(error))
        return redirect("/account/#secrets")
    verb = "saved" if created else "replaced"
    messages.success(
        request, f"Secret {secret.name} {verb}. Its value is not shown again; use it as secrets: [{secret.name}]."
    )
    return redirect("/account/#secrets")


@login_required
@require_POST
def secret_delete_view(request: HttpRequest, name: str) -> HttpResponse:
    secret = get_object_or_404(Secret, user=request.user, name=name)
    secret.delete()
    messages.success(request, f"Secret {name} deleted. Tasks that name it fail their next attempt.")
    return redirect("/account/#secrets")
