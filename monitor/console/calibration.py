"""The console's Calibration page: each channel's calibration status and log, and the form an industry user (or
an operator) fills in after calibrating an instrument.

``GET /calibration`` is the page; ``GET /api/calibration`` the statuses and entries of the sites the user may
see; ``POST /api/calibration`` records an entry exactly as `pretreat calibration add` does (same validation,
same journal record, `monitor.calibration_cli.entry_from`); ``who`` is who calibrated, and the note ends with the
console user who typed it in. An industry user may record entries for its own company's sites only; an
enforcement user reads and may not record (403). The page itself is `monitor.console.pages.calibration_page`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse

from monitor.calibration import logs, statuses
from monitor.calibration_cli import entry_from
from monitor.checks.events import iso_utc
from monitor.console.requests import allowed_sites, check_csrf, console_of, session_of, site_for, writable_record
from monitor.console.users import Role
from monitor.read.times import UsageError
from monitor.stores.calibration import METHODS, CalibrationError, add

router = APIRouter(prefix="/api")
_FIELDS = ("site", "channel", "date", "who", "method", "found", "left", "next_due", "note")


@router.get("/calibration")
def calibration_list(request: Request) -> dict[str, Any]:
    c, s = console_of(request), session_of(request)
    sites = allowed_sites(c, s)
    now = time.time()
    found = logs(writable_record(c))
    units = {(x.id, ch.id): (ch.kind.value, ch.unit) for x in c.config.sites for ch in x.channels}
    rows = []
    for site, channel, st in statuses(c.config, now):
        if site not in sites:
            continue
        rows.append({"site": site, "channel": channel, "kind": units[(site, channel)][0],
                     "unit": units[(site, channel)][1], "status": st.state, "overdue": st.overdue,
                     "due": None if st.due is None else iso_utc(st.due), "text": st.text(),
                     "entries": [e.to_dict() for e in reversed(found.get((site, channel), []))]})
    return {"channels": rows, "methods": METHODS, "now": iso_utc(now)}


@router.post("/calibration")
async def calibration_add(request: Request) -> JSONResponse:
    c, s = console_of(request), session_of(request)
    check_csrf(request, s)
    if s.user.role is Role.ENFORCEMENT:
        raise HTTPException(403, "an enforcement user may read the calibration log, not record in it")
    if "json" not in request.headers.get("content-type", ""):
        raise HTTPException(415, "send the entry as JSON")
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise HTTPException(400, "the body is not JSON") from exc
    if not isinstance(body, dict):
        raise HTTPException(400, "the body must be a JSON object")
    values = {k: body.get(k) for k in _FIELDS}
    site_for(c, s, str(values["site"] or ""))
    found, left = values["found"], values["left"]
    if not isinstance(found, list) or not isinstance(left, list):
        raise HTTPException(400, "found and left: lists of 'reference:reading' points")
    note = str(values["note"] or "").strip()
    if len(note) > 2000 or len(str(values["who"] or "")) > 200:
        raise HTTPException(400, "who is limited to 200 characters, the note to 2000")
    try:
        entry, kind = entry_from(c.config, site=str(values["site"]), channel=str(values["channel"] or ""),
                                 date=str(values["date"] or ""), who=str(values["who"] or ""),
                                 method=str(values["method"] or ""), found=[str(x) for x in found],
                                 left=[str(x) for x in left], next_due=str(values["next_due"] or "") or None,
                                 note=f"{note} [entered in the console by {s.user.name}]".strip(), now=time.time())
        seq = add(writable_record(c), entry, kind)
    except (UsageError, CalibrationError) as exc:
        raise HTTPException(400, str(exc)) from exc
    return JSONResponse({"recorded": entry.to_dict(), "journal_seq": seq})
