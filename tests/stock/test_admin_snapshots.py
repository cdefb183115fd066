"""Full snapshots in the back-office (decisions.md, "Full snapshots", "Around it"): the list, a
held snapshot's page (its reasons in words, the counts, the absent levels), the commit by the
absent count it shows (a wrong count zeroes nothing), the abandonment, and a movement's
snapshot on the product's page."""

import html as html_lib
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from stock.levels import levels_set
from stock.models import StockLevel, StockMovement, StockSnapshot
from stock.movements import Source
from stock.warehouses import default_warehouse, warehouse_save
from tests.factories import ProductFactory, set_level

pytestmark = pytest.mark.django_db

State = StockSnapshot.State


@pytest.fixture
def boss_client(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "x"))
    return client


@pytest.fixture
def viewer_client(db) -> Client:
    """Staff who may view snapshots and nothing more."""
    user = User.objects.create_user("viewer", "viewer@example.com", "x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_stocksnapshot"))
    client = Client()
    client.force_login(user)
    return client


def _text(response) -> str:
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def _messages(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def _snapshot(snapshot_id="ST-2026-11-28", *, warehouse=None, state=State.HELD, **fields):
    now = timezone.now()
    values = {
        "posted_at": now - timedelta(hours=1),
        "declared_items": 10,
        "received_items": 8,
        "opened_at": now - timedelta(hours=3),
        "expires_at": now + timedelta(hours=21),
        "changed_at": now - timedelta(hours=2),
        **fields,
    }
    if state == State.HELD:
        values.setdefault("held_at", now - timedelta(hours=2))
        values.setdefault("held_reasons", ["count_mismatch", "too_many_absent"])
    return StockSnapshot.objects.create(
        snapshot_id=snapshot_id,
        warehouse=warehouse or default_warehouse(),
        state=state,
        **values,
    )


def _absent_products(count: int, quantity: int = 3, prefix: str = "AB") -> list:
    """Products whose level in the default warehouse no item of the snapshot set (no document
    time): absent."""
    return [
        ProductFactory(stock_code=f"{prefix}-{n:04d}", ean=f"859000{n:07d}", shop_quantity=quantity)
        for n in range(count)
    ]


def _named(snapshot, stock_code="NAMED-1", quantity=5):
    """A product the snapshot's parts named: its level carries the snapshot's document time."""
    product = ProductFactory(stock_code=stock_code, shop_quantity=0)
    set_level(product, snapshot.warehouse, quantity, posted_at=snapshot.posted_at)
    return product


def _page(snapshot) -> str:
    return reverse("admin:stock_stocksnapshot_change", args=(snapshot.pk,))


def _levels(products) -> list[int]:
    return [
        StockLevel.objects.get(product=product, warehouse=default_warehouse()).quantity
        for product in products
    ]


class TestList:
    def test_it_shows_state_warehouse_counts_and_reasons_newest_first(self, boss_client):
        now = timezone.now()
        branch, _ = warehouse_save("BRNO")
        _snapshot("ST-OLD", state=State.COMMITTED, absent=4, opened_at=now - timedelta(days=2))
        _snapshot("ST-HELD", warehouse=branch, declared_items=1200, received_items=1100)

        response = boss_client.get(reverse("admin:stock_stocksnapshot_changelist"))

        assert response.status_code == 200
        listed = [s.snapshot_id for s in response.context["cl"].result_list]
        assert listed == ["ST-HELD", "ST-OLD"]
        text = _text(response)
        for header in ("Snapshot ID", "State", "Declared items", "Received items", "Absent"):
            assert header in text
        assert "ST-HELD Held BRNO 1200 1100 - Count mismatch, Too many absent" in text
        assert "ST-OLD Committed MAIN 10 8 4 -" in text

    @pytest.mark.parametrize(
        ("query", "listed"),
        [
            ("state__exact=held", ["ST-HELD"]),
            ("state__exact=committed", ["ST-OLD"]),
            ("q=st-old", ["ST-OLD"]),
            ("warehouse__id__exact=BRANCH", ["ST-HELD"]),
        ],
    )
    def test_filters_by_state_and_warehouse_and_search_by_id(self, boss_client, query, listed):
        branch, _ = warehouse_save("BRNO")
        _snapshot("ST-OLD", state=State.COMMITTED, absent=4)
        _snapshot("ST-HELD", warehouse=branch)
        query = query.replace("BRANCH", str(branch.pk))

        response = boss_client.get(f"{reverse('admin:stock_stocksnapshot_changelist')}?{query}")

        assert response.status_code == 200
        assert [s.snapshot_id for s in response.context["cl"].result_list] == listed

    def test_nobody_adds_edits_or_deletes_a_snapshot_there(self, boss_client):
        snapshot = _snapshot()
        before = list(StockSnapshot.objects.values())

        assert boss_client.get(reverse("admin:stock_stocksnapshot_add")).status_code == 403
        delete = reverse("admin:stock_stocksnapshot_delete", args=(snapshot.pk,))
        assert boss_client.post(delete, {"post": "yes"}).status_code == 403
        edited = boss_client.post(_page(snapshot), {"snapshot_id": "X", "state": "committed"})
        assert edited.status_code == 403
        listing = boss_client.get(reverse("admin:stock_stocksnapshot_changelist"))
        assert 'name="action"' not in listing.content.decode()
        assert list(StockSnapshot.objects.values()) == before


class TestHeldPage:
    def test_it_explains_the_reasons_counts_and_absent_levels(self, boss_client):
        absent = _absent_products(3)
        snapshot = _snapshot(absent=3)
        _named(snapshot)

        response = boss_client.get(_page(snapshot))

        assert response.status_code == 200
        text = _text(response)
        assert "the commit would set 3 levels of MAIN to 0" in text
        assert (
            "Items missing or extra ( count_mismatch ): The partner system declared 10 items "
            "for this snapshot and 8 arrived" in text
        )
        assert (
            "Too many products absent ( too_many_absent ): Absent (no item of the snapshot named "
            "them): 3 of the 4 levels holding stock in MAIN. That is more than "
            "SNAPSHOT_MAX_ABSENT_SHARE (10 %) of the levels holding stock and more than "
            "SNAPSHOT_ABSENT_ALLOWED (0)." in text
        )
        assert "Items declared 10 Items received 8" in text
        assert (
            "Levels of MAIN holding stock now 4 Absent now (the commit would set them to 0) 3"
            in text
        )
        sample = re.findall(r"AB-\d{4} 859000\d{7} 3", text)
        assert sample == [f"{p.stock_code} {p.ean} 3" for p in absent]
        assert "NAMED-1" not in text
        assert "type their count (3)" in text
        assert 'id="snapshot-commit"' in response.content.decode()
        assert 'id="snapshot-abandon"' in response.content.decode()

    def test_shrunk_names_the_last_committed_snapshot_and_its_count(self, boss_client):
        now = timezone.now()
        _snapshot(
            "ST-LAST",
            state=State.COMMITTED,
            received_items=1000,
            committed_at=now - timedelta(days=1),
            absent=0,
        )
        snapshot = _snapshot(
            declared_items=700, received_items=700, held_reasons=["shrunk"], absent=0
        )

        text = _text(boss_client.get(_page(snapshot)))

        assert (
            "Much smaller than the last one ( shrunk ): It received 700 items, fewer than 80 % "
            "of the 1000 items of ST-LAST, the last committed snapshot of MAIN "
            "(SNAPSHOT_MAX_SHRINK 20 %)." in text
        )

    def test_a_count_that_changed_since_it_was_held_is_shown_as_the_one_to_confirm(
        self, boss_client
    ):
        _absent_products(2)
        snapshot = _snapshot(absent=5)

        text = _text(boss_client.get(_page(snapshot)))

        assert "Absent now (the commit would set them to 0) 2" in text
        assert "Absent when it was held 5" in text
        assert "type their count (2)" in text

    def test_the_sample_is_the_first_20_and_the_full_list_pages_by_stock_code(self, boss_client):
        absent = _absent_products(130, prefix="ZZ")
        snapshot = _snapshot(absent=130)

        text = _text(boss_client.get(_page(snapshot)))
        assert re.findall(r"ZZ-\d{4}", text) == [p.stock_code for p in absent[:20]]
        assert "All 130 absent levels" in text

        url = reverse("admin:stock_stocksnapshot_absent", args=(snapshot.pk,))
        first = boss_client.get(url)
        assert first.status_code == 200
        assert re.findall(r"ZZ-\d{4}", _text(first)) == [p.stock_code for p in absent[:100]]
        next_url = re.search(r'id="absent-next" href="([^"]+)"', first.content.decode())
        assert next_url is not None
        second = boss_client.get(url + html_lib.unescape(next_url.group(1)))
        assert re.findall(r"ZZ-\d{4}", _text(second)) == [p.stock_code for p in absent[100:]]
        assert 'id="absent-next"' not in second.content.decode()

    def test_a_viewer_sees_the_page_without_the_buttons_and_cannot_post_them(self, viewer_client):
        absent = _absent_products(2)
        snapshot = _snapshot(absent=2)

        page = viewer_client.get(_page(snapshot))
        assert page.status_code == 200
        assert "Why it was held" in _text(page)
        assert 'id="snapshot-commit"' not in page.content.decode()
        assert 'id="snapshot-abandon"' not in page.content.decode()

        for action, data in (("commit", {"confirm_absent": "2"}), ("abandon", {})):
            url = reverse(f"admin:stock_stocksnapshot_{action}", args=(snapshot.pk,))
            assert viewer_client.post(url, data).status_code == 403
        snapshot.refresh_from_db()
        assert snapshot.state == State.HELD
        assert _levels(absent) == [3, 3]


def _commit(client, snapshot, typed):
    url = reverse("admin:stock_stocksnapshot_commit", args=(snapshot.pk,))
    return client.post(url, {"confirm_absent": typed}, follow=True)


class TestCommit:
    @pytest.mark.parametrize("typed", ["2", "4", "0"])
    def test_a_wrong_count_is_refused_naming_the_current_one_and_zeroes_nothing(
        self, boss_client, typed
    ):
        absent = _absent_products(3)
        snapshot = _snapshot(absent=3)
        before = list(StockSnapshot.objects.values())

        response = _commit(boss_client, snapshot, typed)

        assert response.status_code == 200
        assert _messages(response) == [
            f"Not committed: you typed {typed}, but 3 levels are absent now. Nothing was "
            "zeroed. Review the absent levels again; to set them to 0, type 3."
        ]
        assert list(StockSnapshot.objects.values()) == before
        assert _levels(absent) == [3, 3, 3]
        assert not StockMovement.objects.filter(reason="snapshot_absent").exists()

    @pytest.mark.parametrize("typed", ["", "three", "-3", "3.0", "1" * 11])
    def test_something_other_than_a_count_is_refused(self, boss_client, typed):
        absent = _absent_products(3)
        snapshot = _snapshot(absent=3)

        response = _commit(boss_client, snapshot, typed)

        assert _messages(response) == [
            f"Type the number of absent levels the page shows (a whole number), not "
            f"{typed!r}: nothing was committed, nothing was zeroed."
        ]
        snapshot.refresh_from_db()
        assert snapshot.state == State.HELD
        assert _levels(absent) == [3, 3, 3]

    def test_the_right_count_commits_and_the_levels_are_0(self, boss_client):
        absent = _absent_products(3)
        snapshot = _snapshot(absent=3)
        named = _named(snapshot)

        response = _commit(boss_client, snapshot, " 3 ")

        assert _messages(response) == [
            "Snapshot ST-2026-11-28 committed: 3 levels of MAIN set to 0."
        ]
        snapshot.refresh_from_db()
        assert (snapshot.state, snapshot.absent, snapshot.changed_by) == (
            State.COMMITTED,
            3,
            "boss",
        )
        assert snapshot.held_reasons == ["count_mismatch", "too_many_absent"]
        assert _levels(absent) == [0, 0, 0]
        assert _levels([named]) == [5]
        zeroed = StockMovement.objects.filter(reason="snapshot_absent", snapshot=snapshot)
        assert sorted(zeroed.values_list("product__stock_code", "before", "after")) == [
            (p.stock_code, 3, 0) for p in absent
        ]
        # The page now says what it zeroed, and offers nothing more.
        text = _text(response)
        assert "3 levels of MAIN were set to 0" in text
        assert "The reasons a person's confirmation overrode" in text
        assert "All 3 levels it set to 0" in text
        assert 'id="snapshot-commit"' not in response.content.decode()

    def test_an_open_snapshot_is_not_committed_here(self, boss_client):
        absent = _absent_products(1)
        snapshot = _snapshot(state=State.OPEN, received_items=10)

        response = _commit(boss_client, snapshot, "1")

        assert _messages(response) == [
            "Snapshot ST-2026-11-28 is open: only a held snapshot is committed here. Nothing "
            "was zeroed."
        ]
        snapshot.refresh_from_db()
        assert snapshot.state == State.OPEN
        assert _levels(absent) == [3]

    def test_an_expired_snapshot_is_expired_not_committed(self, boss_client):
        absent = _absent_products(1)
        snapshot = _snapshot(absent=1, expires_at=timezone.now() - timedelta(minutes=1))

        response = _commit(boss_client, snapshot, "1")

        assert _messages(response) == [
            "Snapshot ST-2026-11-28 is expired: only a held snapshot is committed here. "
            "Nothing was zeroed."
        ]
        snapshot.refresh_from_db()
        assert snapshot.state == State.EXPIRED
        assert _levels(absent) == [3]


class TestAbandon:
    @pytest.mark.parametrize("state", [State.OPEN, State.HELD])
    def test_an_open_or_held_one_is_abandoned_and_nothing_zeroed(self, boss_client, state):
        absent = _absent_products(2)
        snapshot = _snapshot(state=state)

        url = reverse("admin:stock_stocksnapshot_abandon", args=(snapshot.pk,))
        response = boss_client.post(url, follow=True)

        assert _messages(response) == [
            "Snapshot ST-2026-11-28 abandoned: nothing was zeroed, its parts stay applied."
        ]
        snapshot.refresh_from_db()
        assert (snapshot.state, snapshot.changed_by) == (State.ABANDONED, "boss")
        assert _levels(absent) == [3, 3]
        assert "Abandoned at" in _text(response)
        assert 'id="snapshot-abandon"' not in response.content.decode()

    def test_a_committed_one_is_not_abandoned(self, boss_client):
        snapshot = _snapshot(state=State.COMMITTED, absent=0, committed_at=timezone.now())

        url = reverse("admin:stock_stocksnapshot_abandon", args=(snapshot.pk,))
        response = boss_client.post(url, follow=True)

        assert _messages(response) == [
            "Snapshot ST-2026-11-28 is committed: only an open or held snapshot is abandoned."
        ]
        snapshot.refresh_from_db()
        assert snapshot.state == State.COMMITTED


class TestMovementsNameTheirSnapshot:
    def test_the_product_page_shows_the_commit_and_the_part_with_the_snapshot_id(self, boss_client):
        [product] = _absent_products(1)
        snapshot = _snapshot(absent=1)
        part_of = _snapshot("ST-PART", state=State.OPEN)
        other = ProductFactory(stock_code="PART-1", shop_quantity=0)
        levels_set(
            {other.pk: 4},
            source=Source(
                StockMovement.Reason.SYNC,
                request_id="ST-PART-0001",
                posted_at=part_of.posted_at,
                snapshot_pk=part_of.pk,
            ),
            now=timezone.now(),
            posted_at=part_of.posted_at,
        )
        _commit(boss_client, snapshot, "1")

        zeroed = _text(boss_client.get(reverse("admin:catalog_product_change", args=(product.pk,))))
        assert re.search(r"Snapshot: absent [^|]*snapshot ST-2026-11-28", zeroed)
        part = boss_client.get(reverse("admin:catalog_product_change", args=(other.pk,)))
        assert re.search(r"Sync ST-PART-0001 .*snapshot ST-PART", _text(part))
        link = reverse("admin:stock_stocksnapshot_change", args=(part_of.pk,))
        assert f'href="{link}"' in part.content.decode()

    def test_the_movements_list_finds_a_snapshots_movements_by_its_id(self, boss_client):
        absent = _absent_products(2)
        snapshot = _snapshot(absent=2)
        _commit(boss_client, snapshot, "2")

        response = boss_client.get(
            reverse("admin:stock_stockmovement_changelist") + "?q=ST-2026-11-28"
        )

        assert response.status_code == 200
        listed = response.context["cl"].result_list
        assert sorted(m.product_id for m in listed) == sorted(p.pk for p in absent)
        assert "snapshot ST-2026-11-28" in _text(response)


def test_a_sync_operator_reviews_and_commits_a_held_snapshot(db):
    """The "sync operators" group (a migration gives it the snapshots' view and change
    permissions) sees the list and commits a held snapshot by its count."""
    from django.contrib.auth.models import Group

    operator = User.objects.create_user("operator", "op@example.com", "x", is_staff=True)
    operator.groups.add(Group.objects.get(name="sync operators"))
    client = Client()
    client.force_login(operator)
    absent = _absent_products(2)
    snapshot = _snapshot(absent=2)

    assert client.get(reverse("admin:stock_stocksnapshot_changelist")).status_code == 200
    response = _commit(client, snapshot, "2")

    assert _messages(response) == ["Snapshot ST-2026-11-28 committed: 2 levels of MAIN set to 0."]
    snapshot.refresh_from_db()
    assert (snapshot.state, snapshot.changed_by) == (State.COMMITTED, "operator")
    assert _levels(absent) == [0, 0]
