"""A compute action: the order book is a dictionary here; in real life, your API."""

from pydantic import BaseModel, Field

import gambit

ORDERS = {
    "A1001": {"status": "shipped", "eta": "2 days"},
    "A1002": {"status": "delayed", "eta": "5 days", "reason": "carrier backlog"},
    "A1003": {"status": "delivered", "eta": None},
}


class OrderQuery(BaseModel):
    order_id: str = Field(description="The order id, such as A1001")


class OrderStatus(BaseModel):
    order_id: str
    found: bool
    status: str | None = None
    eta: str | None = None
    reason: str | None = None


def run(ctx):
    order_id = ctx.input["order_id"].strip().upper()
    order = ORDERS.get(order_id)
    if order is None:
        return {
            "payload": {"order_id": order_id, "found": False},
            "status": 404,
            "message": "no such order",
        }
    return {"order_id": order_id, "found": True, **order}


deck = gambit.define_deck(
    run=run,
    label="Order status lookup",
    context_schema=OrderQuery,
    response_schema=OrderStatus,
)
