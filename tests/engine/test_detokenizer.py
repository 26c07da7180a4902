from worthit.engine.detokenizer import Detokenizer


def pieces(*chunks: bytes):
    table = dict(enumerate(chunks))
    return table.__getitem__, list(table)


def test_utf8_character_split_across_tokens_is_held_back():
    data = "值得".encode()
    piece, ids = pieces(data[:2], data[2:4], data[4:])
    detok = Detokenizer(piece)
    out = [detok.add(i) for i in ids]
    assert out == ["", "值", "得"]
    assert detok.text == "值得"


def test_character_cut_off_at_the_end_is_dropped_not_garbled():
    piece, ids = pieces(b"ok", "值".encode()[:2])
    detok = Detokenizer(piece)
    assert [detok.add(i) for i in ids] == ["ok", ""]
    assert detok.flush() == ""
    assert detok.text == "ok"


def test_stop_string_across_tokens_never_leaks():
    piece, ids = pieces(b"Yes. ##", b"#END", b" more")
    detok = Detokenizer(piece, stop=["###END"])
    first = detok.add(ids[0])
    assert first == "Yes. "
    assert detok.add(ids[1]) == ""
    assert detok.stopped
    assert detok.text == "Yes. "
    assert detok.add(ids[2]) == ""


def test_held_back_prefix_released_when_stop_never_comes():
    piece, ids = pieces(b"a #", b"#b")
    detok = Detokenizer(piece, stop=["###"])
    assert detok.add(ids[0]) == "a "
    assert detok.add(ids[1]) == "##b"
    assert detok.flush() == ""
