"""The browser workbench: blind double coding, live agreement, adjudication and review of routed
items, over one SQLite project file (`classify workbench serve`).

items.py      one item's codes and decision, and the blind-coding rule (first codes count)
project.py    the project database: records, coders, assignments, codes, decisions (append-only)
figures.py    agreement figures: kappa per coder pair (gold stats' own function), alpha, confusion
adjudicate.py proposals, export as gold, adjudications as a review queue for `review apply`
reviewtask.py the review queue as a task; decisions go to the review loop's decisions file
render.py     issue text for reading (escaped markdown, versions and errors marked)
app.py        the Starlette app: routes, middleware and error pages
auth.py       who is speaking (session or token, never the request's claim), CSRF
middleware.py security headers, foreign Origins refused, request bodies bounded
pages.py      the HTML pages
api.py        the JSON API
web.py        what pages, API and middleware share (app state and its cache, rendering a page)
server.py     open or create a project, bind, and serve it
"""
