"""Snapshot signatures (gaca_envs.signing): HMAC-SHA256 over canonical JSON, keys, clear refusals."""

from __future__ import annotations

import json

import pytest

from gaca_envs.signing import SIGNATURE_FIELD, canonical_json, is_signed, new_key, resolve_key, sign, verify
from gaca_envs.task_env import EnvSnapshot

SNAPSHOT = {
    "env": "criticalchain",
    "version": 1,
    "task_id": "train-0",
    "steps": 2,
    "done": False,
    "observation": "Stage 3 of 10: you are at the mill. Über",
    "state": {"stage": 2, "roads": [], "env_args": {"noise": 0.2}},
    "rng": None,
}


def test_a_signed_snapshot_verifies_and_travels_through_json_and_envsnapshot():
    key = new_key()
    signed = sign(SNAPSHOT, key)
    assert len(signed[SIGNATURE_FIELD]) == 64 and is_signed(signed) and not is_signed(SNAPSHOT)
    assert verify(signed, key) == SNAPSHOT
    # Any JSON encoder that keeps the values keeps the signature valid (key order, spacing, escapes).
    again = json.loads(json.dumps(dict(reversed(list(signed.items()))), indent=2, ensure_ascii=True))
    assert verify(again, key) == SNAPSHOT
    # EnvSnapshot carries it (not part of its value) and to_dict gives it back.
    snapshot = EnvSnapshot.from_dict(signed)
    assert snapshot.signature == signed[SIGNATURE_FIELD] and snapshot == EnvSnapshot.from_dict(SNAPSHOT)
    assert verify(snapshot.to_dict(), key) == SNAPSHOT and "signature" not in EnvSnapshot.from_dict(SNAPSHOT).to_dict()
    assert sign(signed, key) == signed  # re-signing replaces the field


def test_an_altered_unsigned_or_foreign_snapshot_is_refused():
    key = new_key()
    signed = sign(SNAPSHOT, key)
    altered = [
        {**signed, "steps": 3},
        {**signed, "done": True},
        {**signed, "state": {**SNAPSHOT["state"], "stage": 3}},
        {**signed, "observation": signed["observation"] + " "},
        {**signed, "steps": 2.0},  # equal in Python, another JSON value
        {**signed, "extra": 1},
        sign(SNAPSHOT, new_key()),  # another server's key
        {**signed, SIGNATURE_FIELD: signed[SIGNATURE_FIELD].upper()},
        {**signed, SIGNATURE_FIELD: "é" * 64},
        {**signed, SIGNATURE_FIELD: 7},
    ]
    for snapshot in altered:
        with pytest.raises(ValueError, match="snapshot field signature does not match the snapshot: it was altered"):
            verify(snapshot, key)
    with pytest.raises(ValueError, match="snapshot field signature is missing: this server restores only"):
        verify(SNAPSHOT, key)
    with pytest.raises(ValueError, match="a signed snapshot must be a dict, got list"):
        verify([signed], key)
    with pytest.raises(ValueError, match="a signed snapshot must hold JSON values only"):
        sign({**SNAPSHOT, "steps": float("nan")}, key)


def test_keys_come_from_the_argument_the_environment_or_chance(monkeypatch):
    assert resolve_key("a deployment key of 32 characters") == b"a deployment key of 32 characters"
    assert resolve_key(None, {"GACA_SNAPSHOT_KEY": "from the environment, long"}) == b"from the environment, long"
    monkeypatch.setenv("GACA_SNAPSHOT_KEY", "x" * 16)
    assert resolve_key(None) == b"x" * 16
    monkeypatch.delenv("GACA_SNAPSHOT_KEY")
    first, second = resolve_key(None), resolve_key(None)
    assert len(first) == 32 and first != second  # random: one per server process that draws it
    with pytest.raises(ValueError, match="snapshot key must have at least 16 bytes, got 5; generate one with"):
        resolve_key("short")
    with pytest.raises(ValueError, match=r"\$GACA_SNAPSHOT_KEY must have at least 16 bytes, got 3"):
        resolve_key(None, {"GACA_SNAPSHOT_KEY": "abc"})
    with pytest.raises(ValueError, match="snapshot key must be a str or bytes, got int"):
        resolve_key(12345678901234567890)
    assert canonical_json({"b": 1, "a": [1.5, "é"]}) == '{"a":[1.5,"é"],"b":1}'.encode()
