from django.contrib import admin
from django.templatetags.static import static
from django.urls import path, re_path
from django.utils.functional import lazy
from django.views.generic.base import RedirectView

from flows_app import views as flow_views
from guidepost import metrics as metrics_views
from guidepost import views as project_views
from guidepost.api import api
from runs_app import views as run_views

# The admin names the product its staff signed in to, not the framework.
admin.site.site_header = "guidepost"
admin.site.site_title = "guidepost admin"
admin.site.index_title = "guidepost administration"

urlpatterns = [
    path("", run_views.runs_list, name="runs"),
    path("r/<str:run_id>", run_views.run_detail, name="run"),
    path("r/<str:run_id>/live", run_views.run_live, name="run-live"),
    path("r/<str:run_id>/claim", run_views.run_claim, name="run-claim"),
    path("r/<str:run_id>/resolve", run_views.run_resolve, name="run-resolve"),
    path("r/<str:run_id>/close", run_views.run_close, name="run-close"),
    path("f/", flow_views.flows_list, name="flows"),
    path("f/<str:flow_id>", flow_views.flow_detail, name="flow"),
    path("diagram.css", flow_views.diagram_stylesheet, name="diagram-css"),
    path("api/", api.urls),  # its index at /api/ is one of its endpoints
    # Prometheus' text format, for the allowed addresses or the metrics token.
    path("metrics", metrics_views.metrics, name="metrics"),
    # Agent keys and audit records were runs_app's until they moved to access_app: links to
    # their admin pages from before still arrive.
    re_path(
        r"^admin/runs_app/(?P<page>(agentkey|auditrecord)/.*)$",
        RedirectView.as_view(url="/admin/access_app/%(page)s", permanent=True, query_string=True),
    ),
    # Before the admin's own: its sign-in, landing people where they work.
    path("admin/login/", project_views.sign_in, name="sign-in"),
    path("admin/", admin.site.urls),
    # RFC 9728: the metadata of the resource at /mcp, and of the server as a whole.
    re_path(
        r"^\.well-known/oauth-protected-resource(?:/mcp/?)?$",
        project_views.protected_resource_metadata,
        name="oauth-protected-resource",
    ),
    # Only reached when Django serves /mcp itself (runserver): `serve` routes it to MCP first.
    re_path(r"^mcp/?$", project_views.mcp_elsewhere),
    # Browsers ask for /favicon.ico on pages that name none (the admin's).
    path("favicon.ico", RedirectView.as_view(url=lazy(static, str)("guidepost/favicon.svg"))),
]

# An unknown /api/ path and a database that cannot be reached answer the error object, not
# an HTML page; an unknown page, a page with the site's navigation.
handler404 = "guidepost.views.not_found"
handler500 = "guidepost.views.server_error"
