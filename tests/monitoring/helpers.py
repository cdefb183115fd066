"""Reading /metrics back as numbers."""

from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "scrape-token-for-tests"


def scrape(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, keyed by (name, sorted labels)."""
    response = client.get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
