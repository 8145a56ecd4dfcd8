"""The web dashboard: server-rendered pages and a JSON API over the read layer (``warpforge.db.queries``).

Read-only by construction: the app opens the database through a read-only URL (SQLite ``mode=ro``,
PostgreSQL ``default_transaction_read_only``) and only ever calls :class:`warpforge.db.queries.Reader`.
Pages and ``/api`` share the view functions in :mod:`warpforge.dashboard.views`, so a number on a page is
the number the API returns.

Example::

    >>> from warpforge.dashboard.app import create_app
    >>> app = create_app("sqlite:///wf.db")          # doctest: +SKIP
    >>> # uvicorn.run(app, host="127.0.0.1", port=8787)
"""
