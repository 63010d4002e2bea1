"""Review pages: a recorded run, or the diff of two, as one self-contained static HTML file a
reviewer opens cold (inline style, no script, nothing fetched), every string redacted again."""
