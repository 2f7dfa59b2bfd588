"""A config that cannot mean anything fails when the reward is built, naming the file and the key."""

from __future__ import annotations

import json
import math
import pathlib
from pathlib import Path
from typing import Any

import pytest
from conftest import THINK, completion

from rewardkit.config import ConfigError
from rewardkit.loop.config import load_run_config
from rewardkit.rewards import ExpertMatch, JsonValid, RewriteSimilarity, ThinkLength, ThinkQuality
from rewardkit.rewards.config import load_config
from rewardkit.rewards.registry import config_schema

KEYS = {"rewrite": "q", "plan": "steps", "expert": "who", "tasks": "what"}
STEP = {"type": "object", "properties": {"who": {"type": "string"}, "what": {"type": "array"}}}


def use_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: str | bytes) -> Path:
    path = tmp_path / "rk.yaml"
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    monkeypatch.setenv("REWARDKIT_CONFIG", str(path))
    return path


def fails(build: Any, *fragments: str) -> str:
    with pytest.raises(ConfigError) as info:
        build()
    message = str(info.value)
    assert "\n" not in message, "one line"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


class TestNonFinite:
    @pytest.mark.parametrize(
        ("yaml_text", "key"),
        [
            # NaN passes minimum/maximum (every comparison is false): every score would become NaN.
            ("rewrite_similarity:\n  alpha: .nan\n", "rewrite_similarity.alpha"),
            # eps NaN turned an out-of-band 0 into 1.0.
            ("think_length:\n  eps: .nan\n", "think_length.eps"),
            # A weight with only a minimum admits +inf: the weighted mean becomes NaN.
            ("plan_coverage:\n  weights:\n    coverage: .inf\n", "plan_coverage.weights.coverage"),
            # -inf is refused before the range check, with the same message.
            ("think_length:\n  eps: -.inf\n", "think_length.eps"),
            # YAML spells NaN several ways; all of them are caught.
            ("expert_match:\n  fuzzy_threshold: .NaN\n", "expert_match.fuzzy_threshold"),
            # A literal too large for a double overflows to inf while loading.
            ("plan_coverage:\n  match_threshold: 1.0e+400\n", "plan_coverage.match_threshold"),
            ("think_quality:\n  min_distinct_ratio: .nan\n", "think_quality.min_distinct_ratio"),
            # Free-form sections (validated later by their plugins) are covered too.
            ("user_sim:\n  temperature: .inf\n", "user_sim.temperature"),
            ("rollout:\n  nested:\n    - 1\n    - .nan\n", "rollout.nested.1"),
        ],
    )
    def test_file_names_file_and_dotted_key(self, tmp_path, monkeypatch, yaml_text: str, key: str) -> None:
        path = use_config(tmp_path, monkeypatch, yaml_text)
        fails(ThinkLength, str(path), f": {key}: ", "not a finite number")

    def test_programmatic_overrides_are_checked_too(self) -> None:
        # The config= argument of a reward is another source of values.
        fails(lambda: RewriteSimilarity(config={"rewrite_similarity": {"alpha": math.nan}}), "overrides", "alpha")

    def test_finite_values_still_load(self, tmp_path, monkeypatch) -> None:
        # The check must not reject ordinary floats, ints or exponents.
        use_config(tmp_path, monkeypatch, "think_length:\n  eps: 2.5e+1\nplan_coverage:\n  match_threshold: 0.25\n")
        cfg = config_schema().load()
        assert (cfg.think_length.eps, cfg.plan_coverage.match_threshold) == (25.0, 0.25)


class TestUnreadableFile:
    @pytest.mark.parametrize(
        ("data", "fragments"),
        [
            # A syntax error: file, line and column, never a raw yaml exception.
            ("think_length:\n  max: [1, 2\n", ("invalid YAML at line 3, column 1",)),
            ("think_length:\n\tmax: 3\n", ("invalid YAML at line 2, column 1",)),  # a tab indents
            # A timestamp-looking value that is no date: PyYAML raises a bare ValueError.
            ("schema: 2020-13-01\n", ("invalid YAML", "month must be in 1..12")),
            # Latin-1 bytes: the file and the offending byte.
            (b"schema: \xe9n\n", ("not UTF-8 text (byte 8 is 0xe9)",)),
            # Python tags are refused by safe_load; reported with the position.
            ("schema: !!python/object:os.system x\n", ("invalid YAML at line 1, column 9",)),
            # Top levels that are not a mapping, including an empty list (once read as "no config").
            ("- a\n- b\n", ("top level must be a mapping", "got list")),
            ("[]\n", ("top level must be a mapping", "got list")),
            ("42\n", ("top level must be a mapping", "got int")),
            # An anchor that contains itself neither hangs nor crashes: it is simply the wrong type.
            ("think_quality:\n  banned: &b [*b]\n", ("think_quality.banned.0",)),
        ],
    )
    def test_bad_file_is_one_config_error_naming_it(self, tmp_path, monkeypatch, data, fragments) -> None:
        path = use_config(tmp_path, monkeypatch, data)
        fails(ThinkQuality, str(path), *fragments)  # it reads think_quality; the rest fail any reward

    def test_directory(self, tmp_path, monkeypatch) -> None:
        # A directory used to be reported as "file not found".
        monkeypatch.setenv("REWARDKIT_CONFIG", str(tmp_path))
        fails(ThinkLength, f"REWARDKIT_CONFIG={tmp_path}", "is a directory")

    def test_unreadable_file(self, tmp_path, monkeypatch) -> None:
        # chmod 000 does not stop root, so the permission error is injected where the file is read.
        path = use_config(tmp_path, monkeypatch, "schema: en\n")
        real = pathlib.Path.read_text

        def denied(self: Path, *args: Any, **kwargs: Any) -> str:
            if self == path:
                raise PermissionError(13, "Permission denied", str(self))
            return real(self, *args, **kwargs)

        monkeypatch.setattr(pathlib.Path, "read_text", denied)
        fails(ThinkLength, str(path), "cannot be read (Permission denied)")

    @pytest.mark.parametrize(
        ("make", "fragment"),
        [
            (lambda p: p.write_bytes(b"ok\n\xff\n"), "not UTF-8 text (byte 3)"),  # used to be a raw UnicodeDecodeError
            (lambda p: p.mkdir(), "not found"),
        ],
    )
    def test_banned_file_named_by_the_config(self, tmp_path, make, fragment: str) -> None:
        path = tmp_path / "banned.txt"
        make(path)
        fails(lambda: ThinkQuality(config={"think_quality": {"banned_file": str(path)}}), str(path), fragment)

    def test_banned_file_with_a_bom_bans_its_first_word(self, tmp_path) -> None:
        # With the BOM kept, the first word was "\ufeffforbidden" and never matched.
        path = tmp_path / "banned.txt"
        path.write_text("\ufeffforbidden\n", encoding="utf-8")
        reward = ThinkQuality(config={"think_quality": {"banned_file": str(path)}})
        assert reward([completion("this is forbidden text", "{}")]) == [0.0]

    def test_explicit_path_is_named_without_the_variable(self, tmp_path) -> None:
        # load_config(path=...) (the CLI's --config) names the path itself.
        message = fails(lambda: load_config(path=tmp_path / "missing.yaml"), "missing.yaml", "file not found")
        assert "REWARDKIT_CONFIG" not in message

    @pytest.mark.parametrize(
        ("data", "max_"),
        [
            ("\ufeffthink_length:\n  max: 120\n", 120),  # a BOM (Windows editors) must still load
            ("", 300),  # an empty file means all defaults
            ("# only a comment\n", 300),
        ],
    )
    def test_files_that_still_load(self, tmp_path, monkeypatch, data: str, max_: int) -> None:
        use_config(tmp_path, monkeypatch, data)
        assert ThinkLength().cfg.max == max_


def schema_file(tmp_path: Path, schema: Any, name: str = "answer.schema.json") -> Path:
    path = tmp_path / name
    path.write_text(schema if isinstance(schema, str) else json.dumps(schema), encoding="utf-8")
    return path


def custom(path: Path, **keys: str) -> dict[str, Any]:
    return {"schema": str(path), "schema_keys": {**KEYS, **keys}}


ROOT = {"type": "object", "required": ["q", "steps"], "properties": {"q": {"type": "string"}}}


class TestCustomSchema:
    @pytest.mark.parametrize(
        ("schema", "keys", "fragments"),
        [
            # Not a JSON Schema: where in the schema, and why.
            ({"type": "objekt"}, {}, ("schema: ", "not a valid JSON Schema at type")),
            ({"properties": {"q": {"pattern": "(?<!x"}}}, {}, ("properties.q.pattern", "is not a 'regex'")),
            # Not JSON at all: line and column.
            ("{'q': 1}", {}, ("schema: ", "not JSON (line 1, column 2")),
            # A mapped field the schema does not declare: the schema_keys key, the field and what is declared.
            (
                {**ROOT, "properties": {"query": {}, "steps": {}}},
                {},
                ("schema_keys.rewrite: field 'q' is not declared for the answer object", "['query', 'steps']"),
            ),
            (
                {**ROOT, "properties": {"q": {}, "steps": {"type": "array", "items": STEP}}},
                {"expert": "expert"},
                ("schema_keys.expert: field 'expert' is not declared for the plan's items",),
            ),
            # The same, with the step schema behind a $ref: references are followed.
            (
                {**ROOT, "$defs": {"s": STEP}, "properties": {"q": {}, "steps": {"items": {"$ref": "#/$defs/s"}}}},
                {"tasks": "todo"},
                ("schema_keys.tasks: field 'todo'",),
            ),
            # A $ref to nowhere used to fail at the first completion that reached it.
            (
                {**ROOT, "properties": {"q": {}, "steps": {"$ref": "#/$defs/nope"}}},
                {},
                ("$ref '#/$defs/nope' at properties.steps cannot be resolved (PointerToNowhere)",),
            ),
            # Another file or a URL is never fetched: refused at load.
            ({**ROOT, "properties": {"q": {"$ref": "defs.json"}, "steps": {}}}, {}, ("$ref 'defs.json'",)),
            ({**ROOT, "properties": {"q": {"$ref": "https://example.com/s.json"}, "steps": {}}}, {}, ("example.com",)),
            # A reference that loops without reading a value: validation would recurse until RecursionError.
            (
                {**ROOT, "$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"$ref": "#/$defs/a"}}},
                {},
                ("lead back to themselves", "break the cycle"),
            ),
            # $dynamicRef "" is the root itself, reached without reading anything: found by fuzzing.
            ({**ROOT, "properties": {"q": {"$dynamicRef": ""}, "steps": {}}}, {}, ("$dynamicRef at properties.q",)),
        ],
    )
    def test_fails_at_construction_naming_schema_and_key(self, tmp_path, schema, keys, fragments) -> None:
        path = schema_file(tmp_path, schema)
        fails(lambda: JsonValid(config=custom(path, **keys)), *fragments)
        message = fails(lambda: ExpertMatch(config=custom(path, **keys)))
        assert str(path) in message

    def test_from_the_config_file_too(self, tmp_path, monkeypatch) -> None:
        # The usual route: REWARDKIT_CONFIG names the schema file.
        path = schema_file(tmp_path, {**ROOT, "properties": {"q": {"$ref": "#/nope"}, "steps": {}}})
        use_config(tmp_path, monkeypatch, f"schema: {path}\nschema_keys: {json.dumps(KEYS)}\n")
        fails(JsonValid, str(path), "$ref '#/nope'")

    @pytest.mark.parametrize(
        ("make", "fragment"),
        [
            (lambda p: p.mkdir(), "is a directory"),
            (lambda p: p.write_bytes(b'{"title": "\xff"}'), "not UTF-8 text (byte 11)"),
        ],
    )
    def test_unreadable_schema_file(self, tmp_path, make, fragment: str) -> None:
        path = tmp_path / "s.json"
        make(path)
        fails(lambda: JsonValid(config=custom(path)), str(path), fragment)

    def test_schema_file_without_permission(self, tmp_path, monkeypatch) -> None:
        path = schema_file(tmp_path, ROOT)
        real = pathlib.Path.read_text
        monkeypatch.setattr(
            pathlib.Path,
            "read_text",
            lambda self, *a, **k: (
                (_ for _ in ()).throw(PermissionError(13, "Permission denied")) if self == path else real(self, *a, **k)
            ),
        )
        fails(lambda: JsonValid(config=custom(path)), f"schema: {path}: cannot be read (Permission denied)")

    def test_resolvable_references_work_and_score(self, tmp_path) -> None:
        # Local $defs and the meta-schemas resolve; a BOM in the schema file is tolerated.
        schema = {
            **ROOT,
            "$defs": {"s": STEP, "text": {"type": "string"}},
            "properties": {"q": {"$ref": "#/$defs/text"}, "steps": {"type": "array", "items": {"$ref": "#/$defs/s"}}},
        }
        path = tmp_path / "bom.json"
        path.write_text("\ufeff" + json.dumps(schema), encoding="utf-8")
        reward = JsonValid(config=custom(path))
        good = {"q": "x", "steps": [{"who": "a", "what": ["t"]}]}
        assert reward([completion(THINK, good), completion(THINK, {"q": 1, "steps": []})]) == [1.0, 0.0]

    def test_recursive_but_consuming_schema_is_fine(self, tmp_path) -> None:
        # A tree refers to itself under "items": each step reads deeper into the value, so it ends.
        tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}
        path = schema_file(tmp_path, {**ROOT, "$defs": {"t": tree}, "properties": {"q": {}, "steps": {}}})
        assert JsonValid(config=custom(path))([completion(THINK, {"q": "x", "steps": []})]) == [1.0]

    def test_loose_schema_never_crashes_the_rewards(self, tmp_path) -> None:
        # The schema neither requires the plan nor types it: completions that omit it or make it a string
        # must score, not raise KeyError/AttributeError (they did, indexing data[plan_key]).
        path = schema_file(tmp_path, {"type": "object", "properties": {"q": {}, "steps": {}}})
        texts = [completion(THINK, {"q": "x"}), completion(THINK, {"q": 3, "steps": "all"})]
        assert JsonValid(config=custom(path))(texts) == [1.0, 0.0]
        gold = json.dumps({"q": "x", "steps": [{"who": "a", "what": ["t"]}]})
        scores = ExpertMatch(config=custom(path))(texts, solution=[gold] * 2, experts=[["a"]] * 2)
        assert scores == [0.0, 0.0]


class TestEnvServers:
    # rollout.env_servers: what the remote episode can open a WebSocket on (http(s) becomes ws(s), "/ws" is added).
    # Anything else used to load, every episode then ended env_error, and the run exited 0.
    @pytest.mark.parametrize(
        ("servers", "index", "shown"),
        [
            ("[localhost:8000]", 0, "'localhost:8000'"),  # no scheme: "localhost" is read as one
            ("[ftp://10.0.0.5:21]", 0, "'ftp://10.0.0.5:21'"),  # a scheme a WebSocket cannot speak
            ("['http://:8000']", 0, "'http://:8000'"),  # no host
            ("[ws://10.0.0.5:99999]", 0, "'ws://10.0.0.5:99999'"),  # no such port
            ("[ws://10.0.0.5:80x]", 0, "'ws://10.0.0.5:80x'"),
            ("['http://10.0.0.5:8000?token=x']", 0, "?token=x"),  # "/ws" would land in the query
            ("[http://10.0.0.5:8000, 'https://10.0.0.6:8000#ws']", 1, "#ws"),  # the second one, by its index
            # urlsplit drops tabs and newlines and leading blanks, so these loaded; the episode then opened the URL as
            # written (a host " 10.0.0.5", a path "\n/ws") and every episode ended env_error
            ('["http://10.0.0.5:8000\\n"]', 0, "'http://10.0.0.5:8000\\n'"),
            ('["http://10.0.0.5:8000\\t"]', 0, "'http://10.0.0.5:8000\\t'"),
            ("[' http://10.0.0.5:8000']", 0, "' http://10.0.0.5:8000'"),
            ("['http://10.0. 0.5:8000']", 0, "'http://10.0. 0.5:8000'"),
            ("[ws://10.0.0.5:0]", 0, "'ws://10.0.0.5:0'"),  # port 0 is "any free port" to a listener: no server's
        ],
    )
    def test_a_server_that_is_no_websocket_url_fails_at_load(
        self, tmp_path, monkeypatch, servers: str, index: int, shown: str
    ) -> None:
        path = use_config(tmp_path, monkeypatch, f"rollout:\n  env_servers: {servers}\n")
        fails(
            load_run_config, str(path), f"rollout.env_servers[{index}]: ", shown, "ws://, wss://, http:// or https://"
        )

    @pytest.mark.parametrize(
        ("url", "shown"),
        [
            ("http://ana:s3cret@10.0.0.5:8000", "'http://…@10.0.0.5:8000'"),
            ("wss://ana@envs.example.com/x", "'wss://…@envs.example.com/x'"),  # a user alone: a token misplaced
            ("http://ana:s3cret@10.0.0.5:99999", "'http://…@10.0.0.5:99999'"),  # a bad URL's message hides it too
        ],
    )
    def test_a_user_or_password_in_a_server_url_fails_unshown(
        self, tmp_path, monkeypatch, url: str, shown: str
    ) -> None:
        # The servers read a bearer token ($REWARDKIT_SERVE_TOKEN), never a URL's user and password: those loaded,
        # were sent as HTTP Basic auth, and every episode's error, in the episode log, showed the password.
        path = use_config(tmp_path, monkeypatch, f"rollout:\n  env_servers: [{json.dumps(url)}]\n")
        message = fails(load_run_config, str(path), "rollout.env_servers[0]: ", shown)
        assert "s3cret" not in message and "ana" not in message, message

    def test_every_accepted_form_loads(self, tmp_path, monkeypatch) -> None:
        # a port may be left out where it is the scheme's own (a server behind a proxy on 443)
        servers = ["ws://10.0.0.5:8000", "wss://envs.example.com", "http://[::1]:8000", "https://h:8443/envs/"]
        use_config(tmp_path, monkeypatch, f"rollout:\n  env_servers: {json.dumps(servers)}\n")
        assert load_run_config().rollout.env_servers == tuple(servers)
