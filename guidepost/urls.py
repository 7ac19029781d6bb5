from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.templatetags.static import static
from django.urls import path
from django.views.generic.base import RedirectView

from flows_app import views as flow_views
from guidepost.api import api
from runs_app import views as run_views

urlpatterns = [
    path("", run_views.runs_list, name="runs"),
    path("r/<str:run_id>", run_views.run_detail, name="run"),
    path("r/<str:run_id>/live", run_views.run_live, name="run-live"),
    path("f/", flow_views.flows_list, name="flows"),
    path("f/<str:flow_id>", flow_views.flow_detail, name="flow"),
    path("diagram.css", flow_views.diagram_stylesheet, name="diagram-css"),
    path("api/", api.urls),
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico on pages that name none (the admin's).
    path("favicon.ico", RedirectView.as_view(url=static("guidepost/favicon.svg"))),
]
# Static files from the apps' static/ folders; these patterns are empty unless DEBUG is on.
urlpatterns += staticfiles_urlpatterns()
