"""rlrun's documented Python surface: `from rlrun import train` trains (it names the `rlrun.train` command
module, which is callable as `rlrun.run.train`) whichever of the two is imported first; `rlrun.load`."""

import inspect

import rlrun
import rlrun.run


def test_from_rlrun_import_train_is_callable_as_the_function(monkeypatch):
    import rlrun.train  # the command's module first: the package's `train` is that module from now on
    from rlrun import train

    calls = []
    monkeypatch.setattr(rlrun.train, "train", lambda *args, **kw: calls.append((args, kw)) or {"status": "done"})
    assert train("cfg", "out", resume=None) == {"status": "done"}
    assert calls == [(("cfg", "out"), {"resume": None})]
    assert rlrun.train is train  # one object, as `import rlrun; rlrun.train(...)` finds it


def test_train_shows_the_functions_signature_and_keeps_its_names():
    from rlrun import train

    assert inspect.signature(train) == inspect.signature(rlrun.run.train)
    assert train.train is rlrun.run.train  # `from rlrun.train import train` as before
    assert {"NonFiniteError", "Preempted", "train"} <= set(dir(train))


def test_the_package_lists_train_and_load():
    assert {"train", "load"} <= set(rlrun.__all__) and callable(rlrun.load)
