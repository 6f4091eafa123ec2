"""The report's writers: each output of a page (index.html, summary.md, results.json, the OSV
record) and a bisection's text, rendered from the page model (torchbisect/page/)."""
