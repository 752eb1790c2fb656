"""The read side: what the tools that read the daemon's SQLite file ask of it, apart from how they ask.

`episodes` (the exceedance history), `alarms` (alarm rows and the journal), `status` (the daemon's health
from its snapshot and file), `readings` (a channel's series, latest values, completeness, limits), `times`
(the one parser of the times users type), over read-only connections (`monitor.stores.readonly`). Nothing
here parses arguments, prints or speaks HTTP: the commands (`monitor/*_cli.py`, `exceedances.py`,
`status.py` …) add argparse and rendering, the console (`monitor/console/`) adds sessions and JSON, and
both call these functions directly, so the two can never disagree about the record.
"""
