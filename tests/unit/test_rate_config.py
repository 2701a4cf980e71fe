"""The config's rate limits: profiles.NAME.rate, servers[].rate and serve.rate read into one
RateConfig (unset: no limit), and every wrong type or range reported with file, line and key."""
from __future__ import annotations

import pytest

from actors.settings import config
from actors.settings.rate_section import Rate

SERVER = "    transport: {type: stdio, stdio: {command: x}}\n"


def test_limits_by_profile_server_and_for_anonymous_clients(tmp_path):
    path = tmp_path / "rates.yaml"
    path.write_text("servers:\n  - name: paid\n    rate: {per_minute: 30, burst: 5}\n" + SERVER +
                    "  - name: free\n" + SERVER +
                    "profiles:\n  bots: {servers: [paid], rate: {per_minute: 600, burst: 50}}\n  people: {}\n"
                    "serve:\n  rate: {per_minute: 0.5, burst: 1}\n")
    cfg = config.load(path)
    assert dict(cfg.rates.profiles) == {"bots": Rate(600.0, 50)}
    assert dict(cfg.rates.servers) == {"paid": Rate(30.0, 5)}
    assert cfg.rates.anonymous == Rate(0.5, 1) and cfg.rates.anonymous.shown() == {"per_minute": 0.5, "burst": 1}
    assert cfg.profiles["bots"].servers == frozenset({"paid"})  # the profile itself is read as before
    assert cfg.server("paid").timeout == 30.0  # and so is the server: its rate is not part of it


def test_no_rate_anywhere_is_no_limit():
    rates = config.from_data({"servers": [], "profiles": {"p": {}}}).rates
    assert rates.empty and rates.anonymous is None


@pytest.mark.parametrize(("rate", "said"), [
    ("{per_minute: 0, burst: 5}", "serve.rate.per_minute: must be a number of calls per minute, > 0 and "
                                  "<= 10000000, got int 0"),
    ("{per_minute: lots, burst: 5}", "serve.rate.per_minute: must be a number of calls per minute, > 0 and "
                                     "<= 10000000, got str 'lots'"),
    ("{per_minute: .nan, burst: 5}", "serve.rate.per_minute: must be a number"),
    ("{per_minute: true, burst: 5}", "serve.rate.per_minute: must be a number"),
    ("{per_minute: 20000000, burst: 5}", "serve.rate.per_minute: must be a number"),
    ("{per_minute: 60, burst: 0}", "serve.rate.burst: must be an integer from 1 to 1000000 (calls at once), "
                                   "got int 0"),
    ("{per_minute: 60, burst: 2.5}", "serve.rate.burst: must be an integer from 1 to 1000000 (calls at once), "
                                     "got float 2.5"),
    ("{per_minute: 60}", "serve.rate.burst: is required"),
    ("{burst: 3}", "serve.rate.per_minute: is required"),
    ("{per_minute: 60, burst: 3, per_hour: 9}", "serve.rate.per_hour: unknown key (allowed: burst, per_minute)"),
    ("600", "serve.rate: must be a mapping {per_minute: N, burst: M}"),
])
def test_a_wrong_serve_rate_is_reported_with_its_line(tmp_path, rate, said):
    path = tmp_path / "bad.yaml"
    path.write_text(f"servers: []\nserve:\n  mode: flat\n  rate: {rate}\n")
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert f"{path}:4: {said}" in "\n".join(err.value.problems)


def test_wrong_profile_and_server_rates_name_their_keys(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("servers:\n  - name: s\n    rate: {per_minute: -1, burst: 1}\n" + SERVER +
                    "profiles:\n  bots:\n    rate: {per_minute: 60, burst: many}\n")
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    text = "\n".join(err.value.problems)
    assert f"{path}:3: servers[0].rate.per_minute: must be a number of calls per minute" in text
    assert f"{path}:7: profiles.bots.rate.burst: must be an integer from 1 to 1000000" in text
