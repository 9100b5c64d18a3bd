"""The `gagpo` command line routes to its subcommands and rejects bad arguments clearly."""

import pytest

from gagpo.cli import main


def test_serve_webshop_forwards_to_the_shops_own_options(capsys):
    assert main(["serve", "webshop", "--threads", "0"]) == 2
    assert "--threads must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["serve", "webshop", "--help"])
    assert e.value.code == 0
    assert "--num-products" in capsys.readouterr().out


def test_unknown_arguments_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["eval", "--env", "WebShop-v0", "--policy", "expert", "--bogus"])
    assert e.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_bad_env_arg_is_a_clear_error(capsys):
    assert main(["eval", "--env", "WebShop-v0", "--policy", "expert", "--env-arg", "oops"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
