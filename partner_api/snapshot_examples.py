"""The full snapshot operations' documented calls (OpenAPI examples), on the demo's data as on
a fresh `make run`: a count of the central store (MAIN) that names two of its three products."""

EXAMPLES: dict = {}
