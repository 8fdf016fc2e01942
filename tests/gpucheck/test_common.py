"""The arms and small options of the GPU check, from the registries, are the ones it was validated with."""

from audit.gpucheck import common


def test_arms_and_tiny_options_are_the_validated_ones():
    # the tables audit/gpucheck/common.py kept when the check was validated on an H200
    assert common.HEADS == ["softmax", "sigsoftmax", "gss", "plif", "plif_frozen", "mos", "moc", "mos_uniform",
                            "mixtape"]
    assert common.BODIES == ["awd_lstm", "transformer"]
    old = {"gss": {"c": -1.5, "k": 2.5}, "plif": {"knots": 1000}, "plif_frozen": {"knots": 1000},
           "mos": {"experts": 3, "dropoutl": 0.0}, "moc": {"experts": 3, "dropoutl": 0.0},
           "mos_uniform": {"experts": 3, "dropoutl": 0.0}, "mixtape": {"gate_embedding_size": 8}}
    for head in common.HEADS:
        assert list(common.tiny_options(head).items()) == list(old.get(head, {}).items()), head


def test_every_arm_walks_both_bodies_in_registry_order():
    class Result:
        data = {}

        def note(self, text):
            raise AssertionError(text)

    arms = list(common.every_arm(float("inf"), Result(), "checked"))
    assert arms == [(b, h) for b in common.BODIES for h in common.HEADS] and len(arms) == 18
