"""The page model: what a page says, decided once from stored runs and bisections, as plain data.

`view.build_view` turns runs into the page (`parts.PageView`): its rows (rows.py, folded by
folding.py), each GPU model's headline (headline.py), the marks a verdict is drawn with
(marks.py), the nightly timeline (timeline.py), "What to do" (advice.py), the bisections
(bisections.py), the comparison across GPU models (gpu_models.py) and the runner kinds
(kinds.py).  Nothing here writes a file: report/'s writers render this model.
"""
