"""The operator console: alarms, trends, history and health in a browser, per role.

**A separate process.** ``pretreat console --config FILE`` serves the console (FastAPI under uvicorn) beside
``pretreat run``, reading the daemon's SQLite file (historian, episode store, ``alarm_state``, journal) through
read-only connections (WAL lets them read while the daemon writes) and the health snapshot beside it. Operator
actions go through the daemon's durable command queue (`alarms.commands.CommandQueue`), exactly as
``pretreat alarms ack`` does: the daemon's alarm engine carries them out and journals them with the user's
name. Consequently a console crash, a slow browser or a flood of requests never touches monitoring, and the
console can be restarted or upgraded at any time (users log in again; it holds no other state).

**Users and roles** (`monitor.console.users`, `monitor.console.auth`): a users file beside the site file
(``<site file>.users.toml``) with scrypt hashes, managed by ``pretreat user add|list|remove``. ``operator``:
every site, acknowledge, shelve, unshelve, reset and comment; ``industry``: the sites whose ``company`` (a key
of ``[[site]]``) is its company, read, comment and acknowledge as *seen* (journaled, the plant's alarm left
unacknowledged: only the plant side acknowledges, shelves and resets plant alarms); ``enforcement``: every
site, read-only, history and exports. Anything outside an industry user's sites answers 403, by page, API or
event stream.

**Deployment and TLS.** The console listens on 127.0.0.1:8080 by default and speaks plain HTTP: serve it to
other machines only through a reverse proxy that terminates TLS, and start it with ``--secure-cookies`` so
the session cookie is never sent over plain HTTP. With nginx, for example::

    server {
        listen 443 ssl;
        server_name console.plant.example;
        ssl_certificate     /etc/ssl/certs/console.pem;
        ssl_certificate_key /etc/ssl/private/console.key;
        location / {
            proxy_pass http://127.0.0.1:8080;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto https;
            proxy_buffering off;          # server-sent events must not be buffered
            proxy_read_timeout 1h;        # an idle event stream sends a comment every 15 s
        }
    }

uvicorn trusts ``X-Forwarded-For`` from 127.0.0.1 only (its default), so the login rate limit counts the
real client behind the proxy. The console adds ``X-Accel-Buffering: no`` to event streams for proxies that
honour it.

Modules: `app` (factory, server), `auth` (sessions, CSRF, rate limit, role rules), `users` (users file),
`requests` (session, allowed sites, CSRF and the read-only file, for every handler), `api` (JSON endpoints
and the event stream), `reports` (the daemon's generated reports: list and download), `events` (the follower
behind the stream), `pages` (HTML), `queries`/`trends` (the console's views of what `monitor.read` reads),
`actions` (the command queue), `remarks` (industry ``seen`` and comments on the alarm rows), `overview` (site
tiles), `history_view` (the history page's columns), `kpi` (ISA-18.2 alarm KPIs), `cli` (commands). Pages are drawn
by the scripts in ``static/`` (no CDN, nothing loaded from elsewhere; trends drawn by the vendored uPlot
through ``chart.js``).
"""
