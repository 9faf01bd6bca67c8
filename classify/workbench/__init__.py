"""The browser workbench: blind double coding, live agreement, adjudication and review of routed
items, over one SQLite project file (`classify workbench serve`).

project.py    the project database: records, coders, assignments, codes, decisions (append-only)
agreement.py  kappa per coder pair (gold stats' own function), Krippendorff's alpha, confusion
adjudicate.py proposals, export as gold, adjudications as a review queue for `review apply`
reviewtask.py the review queue as a task; decisions go to the review loop's decisions file
render.py     issue text for reading (escaped markdown, versions and errors marked)
app.py        the Starlette app: pages and the JSON API, tokens, CSRF, CSP
server.py     open or create a project and serve it
"""
