"""Notice-of-violation drafts: the facts of one recorded episode, the law it broke and what follows, in the
jurisdiction's letter template (`config.notice`), as Markdown, PDF or Word (`pretreat nov`, console button)."""
