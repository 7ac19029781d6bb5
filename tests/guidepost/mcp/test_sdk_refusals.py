"""How the gate words the MCP SDK's own refusals (ADR 0074): a refusal of the HTTP request
becomes the error object; a JSON-RPC error answering one request keeps its envelope and
carries the error object as ``data``; an error object already there stays as it is."""

from __future__ import annotations

import json

from guidepost.mcp.gate import shaped


def test_plain_text_413_becomes_request_too_large() -> None:
    refusal, body = shaped(413, b"Request body too large")
    assert refusal.error == "request too large"
    assert json.loads(body)["error"] == "request too large"


def test_a_parse_error_without_an_id_becomes_the_error_object() -> None:
    sdk = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: EOF"}}'
    refusal, body = shaped(400, sdk)
    assert json.loads(body) == {
        "error": "invalid request",
        "reason": "Parse error: EOF",
        "next": refusal.next,
        "retryable": True,
    }


def test_pydantics_details_never_reach_the_client() -> None:
    sdk = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32602, "message": "Validation error: 11 validation errors\n..."},
        }
    ).encode()
    _, body = shaped(400, sdk)
    assert json.loads(body)["reason"] == (
        "the body is not a JSON-RPC 2.0 request, notification or response"
    )


def test_a_json_rpc_error_answering_a_request_keeps_its_id_and_carries_the_object() -> None:
    sdk = b'{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"Bad Request: x"}}'
    _, body = shaped(400, sdk)
    answer = json.loads(body)
    assert (answer["id"], answer["error"]["code"]) == (4, -32600)
    assert answer["error"]["data"]["error"] == "invalid request"


def test_an_error_object_already_in_data_is_left_as_it_is() -> None:
    data = {"error": "prompt not found", "reason": "r", "next": "n", "retryable": True}
    sdk = json.dumps(
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "m", "data": data}}
    ).encode()
    _, body = shaped(400, sdk)
    assert json.loads(body)["error"]["data"] == data


def test_a_406_is_not_acceptable_and_a_500_internal_error() -> None:
    assert shaped(406, b"Not Acceptable: x")[0].error == "not acceptable"
    assert shaped(500, b"boom")[0].error == "internal error"
    assert "boom" not in shaped(500, b"boom")[1].decode()
