"""Bodies and calls of the shop operations, as a storefront sends them."""

from decimal import Decimal

STOCK_QUERY = "/api/v1/shop/stock/query"
ORDERS = "/api/v1/shop/orders"


def order_url(order_id) -> str:
    return f"/api/v1/shop/orders/{order_id}"


def cancel_url(order_id) -> str:
    return f"/api/v1/shop/orders/{order_id}/cancel"


def ack_url(order_id) -> str:
    return f"/api/v1/partner/orders/{order_id}/acknowledge"


def line(product, quantity=1, unit_price="10.00", *, with_ean=True, **extra) -> dict:
    total = Decimal(unit_price) * quantity
    body = {
        "stock_code": product.stock_code,
        "name": f"Tyre {product.stock_code}",
        "quantity": quantity,
        "unit_price": float(unit_price),
        "total": float(total),
    }
    if with_ean:
        body["ean"] = product.ean
    body.update(extra)
    return body


def order_body(*lines, number="W-1001", vat_rate=Decimal("0.21"), **extra) -> dict:
    subtotal = sum((Decimal(str(item["total"])) for item in lines), Decimal(0))
    vat = (subtotal * vat_rate).quantize(Decimal("0.01"))
    body = {
        "order_number": number,
        "customer": {"name": "Jana Nováková", "email": "jana@example.com"},
        "items": list(lines),
        "subtotal": float(subtotal),
        "vat_total": float(vat),
        "total": float(subtotal + vat),
    }
    body.update(extra)
    return body


def place(client, body, **kwargs):
    return client.post(ORDERS, body, format="json", **kwargs)
