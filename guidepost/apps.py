from django.apps import AppConfig


class GuidepostConfig(AppConfig):
    """The project as an app: the MCP transport (``guidepost.mcp``), ``serve`` and its
    start-up checks, the static files every page shares. It holds no models; nothing of
    the other apps imports it."""

    name = "guidepost"
    label = "guidepost"
    verbose_name = "guidepost"
