"""The Dash dashboard. `app.server.create_app` builds it; `app.wsgi` is gunicorn's entry point."""
