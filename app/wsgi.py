"""gunicorn's entry point: `gunicorn app.wsgi:server`.

The only module-level app. Each gunicorn worker imports it after the fork (never use
--preload: an open DuckDB connection must not cross a fork).
"""

from app.server import create_app

server = create_app().server
