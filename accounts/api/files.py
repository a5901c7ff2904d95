"""``/api/v2/files``: the data page's operations for scripts, with the same checks (accounts.files)."""

from __future__ import annotations

from typing import TypedDict

from django.http import FileResponse
from django_stubs_ext import StrPromise
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import files
from common.api import QueryBooleanField, error_responses, parse_query, refuse_blank

STATUS_FOR = {
    files.InvalidPath: status.HTTP_400_BAD_REQUEST,
    files.NotFound: status.HTTP_404_NOT_FOUND,
    files.WrongType: status.HTTP_409_CONFLICT,
    files.ReadOnly: status.HTTP_403_FORBIDDEN,
    files.AlreadyExists: status.HTTP_409_CONFLICT,
    files.NotEmpty: status.HTTP_409_CONFLICT,
    files.TooLarge: status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    files.AccessDenied: status.HTTP_403_FORBIDDEN,
    files.NoSpace: status.HTTP_507_INSUFFICIENT_STORAGE,
    files.DiskQuotaExceeded: status.HTTP_429_TOO_MANY_REQUESTS,
}


class FileAreaProblem(exceptions.APIException):
    """A files.FileAreaError as an API error: its status, code, message and the field at fault."""

    def __init__(self, error: files.FileAreaError) -> None:
        self.status_code = STATUS_FOR.get(type(error), status.HTTP_400_BAD_REQUEST)
        super().__init__(detail=error.message, code=error.code)
        self.fields = {error.field: [error.message]}


PATH_HELP = "Relative to the area's top folder ($HOME for `home`); no leading `/`, no `..`."
PATH_ERRORS: dict[str, str | StrPromise] = {
    "invalid": "Paths are relative to the area's top folder: no leading '/', no '..' part, no NUL."
}


class AreaQuery(serializers.Serializer[None]):
    path = serializers.RegexField(
        files.PATH_PATTERN,
        max_length=files.MAX_PATH_CHARS,
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        help_text=PATH_HELP,
        error_messages=PATH_ERRORS,
    )
    area = serializers.ChoiceField(
        choices=files.AREAS,
        default=files.HOME,
        help_text="`home` (yours, writable), or the shared, read-only `datasets` or `hf`.",
    )


class TargetQuery(AreaQuery):
    """A file or folder itself, never the area's top folder: a path is required."""

    path = serializers.RegexField(
        files.PATH_PATTERN,
        min_length=1,
        max_length=files.MAX_PATH_CHARS,
        trim_whitespace=False,
        help_text=PATH_HELP,
        error_messages=PATH_ERRORS,
    )


class DeleteQuery(TargetQuery):
    recursive = QueryBooleanField(required=False, default=False, help_text="Delete a folder and everything in it.")


class UploadQuery(AreaQuery):
    overwrite = QueryBooleanField(required=False, default=False, help_text="Replace an existing file.")


class UploadBody(serializers.Serializer[None]):
    file = serializers.FileField(allow_empty_file=True)
    name = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Save under this name instead."
    )
    overwrite = QueryBooleanField(required=False, default=False, help_text="Replace an existing file.")


class EntrySerializer(serializers.Serializer[files.Entry]):
    name = serializers.CharField()
    path = serializers.CharField(source="rel", help_text="Relative to the area's top folder.")
    type = serializers.ChoiceField(
        source="kind",
        choices=["dir", "file", "link"],
        help_text="`link`: a link that leads nowhere you can read (links that do are `dir` or `file`).",
    )
    is_link = serializers.BooleanField()
    size = serializers.IntegerField(allow_null=True, help_text="Bytes; null for folders.")
    modified = serializers.DateTimeField(allow_null=True)
    spec_path = serializers.CharField(help_text="The path to write in a task spec.")


class ListingBody(TypedDict):
    area: str
    path: str
    spec_path: str
    writable: bool
    entries: list[files.Entry]
    truncated: bool


class ListingSerializer(serializers.Serializer[ListingBody]):
    area = serializers.ChoiceField(choices=files.AREAS)
    path = serializers.CharField(allow_blank=True)
    spec_path = serializers.CharField()
    writable = serializers.BooleanField()
    entries = EntrySerializer(many=True)
    truncated = serializers.BooleanField(help_text=f"True when more than {files.MAX_LISTING} entries exist.")


class Saved(TypedDict):
    area: str
    path: str
    spec_path: str


class SavedSerializer(serializers.Serializer[Saved]):
    area = serializers.ChoiceField(choices=files.AREAS)
    path = serializers.CharField()
    spec_path = serializers.CharField()


def _saved(location: files.Location) -> Saved:
    return {"area": location.area, "path": location.rel, "spec_path": location.spec_path}


class FileAreaView(APIView):
    def handle_exception(self, exc: Exception) -> Response:
        # The file functions raise their own errors; they become API errors in the one shape.
        if isinstance(exc, files.FileAreaError):
            exc = FileAreaProblem(exc)
        return super().handle_exception(exc)


class FilesView(FileAreaView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="files_list",
        summary="List a folder",
        parameters=[AreaQuery],
        responses={200: ListingSerializer, **error_responses(400, 404, 409)},
        tags=["files"],
    )
    def get(self, request: Request) -> Response:
        query = parse_query(AreaQuery, request)
        location = files.locate(request.user.username, query["path"], query["area"])
        listing = files.list_folder(location)
        body: ListingBody = {
            "area": location.area,
            "path": location.rel,
            "spec_path": location.spec_path,
            "writable": location.writable,
            "entries": listing.entries,
            "truncated": listing.truncated,
        }
        return Response(ListingSerializer(body).data)

    @extend_schema(
        operation_id="files_upload",
        summary="Upload a file into a folder of your home",
        description=(
            "`path` is the folder to upload into; the file keeps its own name unless `name` is "
            "given. An existing file is replaced only with `overwrite=1` (in the query or the body). "
            "A user at or over a disk quota, theirs or their group's, gets a 429 (`disk_quota_exceeded`, "
            "naming the usage and the quota)."
        ),
        parameters=[UploadQuery],
        request={"multipart/form-data": UploadBody},
        responses={201: SavedSerializer, **error_responses(400, 403, 404, 409, 413, 429)},
        tags=["files"],
    )
    def post(self, request: Request) -> Response:
        query = parse_query(UploadQuery, request)
        files.check_upload_length(request.META.get("CONTENT_LENGTH"))
        files.check_disk_quota(request.user.username)
        body = UploadBody(data=request.data)
        refuse_blank(body, request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        folder = files.locate(request.user.username, query["path"], query["area"])
        saved = files.save_upload(
            folder, data["file"], name=data["name"], overwrite=query["overwrite"] or data["overwrite"]
        )
        return Response(SavedSerializer(_saved(saved)).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="files_delete",
        summary="Delete a file, an empty folder, or a folder with recursive=1",
        parameters=[DeleteQuery],
        responses={204: None, **error_responses(400, 403, 404, 409)},
        tags=["files"],
    )
    def delete(self, request: Request) -> Response:
        query = parse_query(DeleteQuery, request)
        location = files.locate(request.user.username, query["path"], query["area"])
        files.delete(location, recursive=query["recursive"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class FileDownloadView(FileAreaView):
    @extend_schema(
        operation_id="files_download",
        summary="Download a file",
        parameters=[TargetQuery],
        responses={
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY),
            **error_responses(400, 404, 409),
        },
        tags=["files"],
    )
    def get(self, request: Request) -> FileResponse:
        query = parse_query(TargetQuery, request)
        location = files.locate(request.user.username, query["path"], query["area"])
        handle = files.open_file(location)
        # Always bytes to save, as the schema says, whatever the name suggests (a guessed
        # text/html would invite a browser to render a user's file).
        return FileResponse(handle, as_attachment=True, filename=location.name, content_type="application/octet-stream")


class FolderView(FileAreaView):
    @extend_schema(
        operation_id="files_mkdir",
        summary="Create a folder (and missing parents) in your home",
        parameters=[TargetQuery],
        request=None,
        responses={201: SavedSerializer, **error_responses(400, 403, 409)},
        tags=["files"],
    )
    def post(self, request: Request) -> Response:
        query = parse_query(TargetQuery, request)
        location = files.locate(request.user.username, query["path"], query["area"], new=True)
        files.make_folder(location)
        return Response(SavedSerializer(_saved(location)).data, status=status.HTTP_201_CREATED)
