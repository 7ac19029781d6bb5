from django.apps import AppConfig


class GuidepostConfig(AppConfig):
    """The project as an app: the MCP transport (``guidepost.mcp``), ``serve`` and its
    start-up checks, the static files every page shares. It holds no models; nothing of
    the other apps imports it."""

    name = "guidepost"
    label = "guidepost"
    verbose_name = "guidepost"

    def ready(self) -> None:
        # The composition root: flows_app sits below runs_app and never imports it, so
        # the project, which may import both, hands it runs_app's reads of runs.
        from flows_app import runs_port
        from runs_app.selectors import flow_runs

        runs_port.flow_runs_provide(flow_runs)
