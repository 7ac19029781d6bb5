from django.contrib import admin
from django.urls import path, re_path

from runs_app.views import mcp_elsewhere

urlpatterns = [
    path("admin/", admin.site.urls),
    # Only reached when Django serves /mcp itself (runserver): `serve` routes it to MCP first.
    re_path(r"^mcp/?$", mcp_elsewhere),
]
