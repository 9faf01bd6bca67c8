# The fetch tests' fixtures, found by pytest here (importing them into each test module would
# shadow them with the test's parameters).
from fetch_fixtures import gh, make_client  # noqa: F401
