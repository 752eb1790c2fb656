"""Self-monitoring and enforcement reports: per-day pre-aggregates kept as data arrives, daily summaries,
monthly 40 CFR 401.17 pH accounting, periodic compliance reports (PDF/HTML/CSV), lab results and the
significant-noncompliance screen, and their schedule."""
