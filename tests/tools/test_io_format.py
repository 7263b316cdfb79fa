"""IREE value strings: parsing --input, printing results, .npy in and out."""

import numpy as np
import pytest
from pyree.runtime.element_types import BY_NAME, dtype_spelling, numpy_dtype
from pyree.runtime.tools.io_format import (
    InputError,
    OutputSpec,
    format_array,
    format_element,
    parse_output_spec,
    parse_value,
    save_npy,
)
from pyree.runtime.vm.host_array import HostArray

rng = np.random.default_rng()
INT_DTYPES = [
    "i8",
    "i16",
    "i32",
    "i64",
    "si8",
    "si16",
    "si32",
    "si64",
    "ui8",
    "ui16",
    "ui32",
    "ui64",
]
FLOAT_DTYPES = ["f16", "f32", "f64"]
F32, F64 = BY_NAME["f32"], BY_NAME["f64"]


def random_array(name: str, shape: tuple[int, ...]) -> np.ndarray:
    dtype = numpy_dtype(BY_NAME[name])
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(dtype)


@pytest.mark.parametrize("name", ["i1"] + INT_DTYPES + FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(), (7,), (3, 5), (2, 3, 5)])
def test_printed_values_read_back_exactly(name, shape):
    array = random_array(name, shape)
    text = format_array(array, max_elements=10**6)
    parsed = parse_value(text)
    assert parsed.dtype == array.dtype and parsed.shape == array.shape
    np.testing.assert_array_equal(parsed, array)


def test_brackets_commas_and_flat_lists_are_the_same_value():
    expected = np.arange(1, 5, dtype=np.float32).reshape(2, 2)
    for text in [
        "2x2xf32=[[1 2][3 4]]",
        "2x2xf32=1 2 3 4",
        "2x2xf32=1,2,3,4",
        "2x2xf32=[1, 2], [3, 4]",
        "2x2xf32=[1 2][3 4]",
    ]:
        np.testing.assert_array_equal(parse_value(text), expected)


def test_odd_shape_round_trip_through_text():
    array = rng.standard_normal((37, 53)).astype(np.float32)
    parsed = parse_value(format_array(array, max_elements=37 * 53))
    np.testing.assert_array_equal(parsed, array)


def test_splats_scalars_and_empty_values():
    splat = parse_value("1x224x224x3xf32=0.25")
    assert splat.shape == (1, 224, 224, 3) and np.all(splat == np.float32(0.25))
    scalar = parse_value("f32=2")
    assert scalar.shape == () and scalar.dtype == np.float32 and np.asarray(scalar) == 2
    assert np.asarray(parse_value("i32=-3")) == -3
    assert parse_value("3xi1=1 false true").values() == [True, False, True]
    assert parse_value("0x4xi8=").shape == (0, 4)
    np.testing.assert_array_equal(parse_value("5xi16"), np.zeros(5, np.int16))  # IREE: zero-filled


def test_integer_extremes_parse_exactly():
    assert parse_value("2xui64=18446744073709551615 0").values() == [2**64 - 1, 0]
    assert parse_value("2xi64=-9223372036854775808 9223372036854775807").values() == [
        -(2**63),
        2**63 - 1,
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        ("4xf32=[1 2 3]", "4 elements expected, 3 given"),
        ("2x3xi32=1 2 3 4 5 6 7", "6 elements expected, 7 given"),
        ("4xq32=1", "unknown element type 'q32'"),
        ("ax4xf32=1", "bad shape 'ax4'"),
        ("-1xf32=1", "bad shape '-1'"),
        ("=1 2", "missing the type"),
        ("3xf32=1 two 3", "'two' is not a number"),
        ("2xi32=1 2.5", "'2.5' is not an integer"),
        ("2xi8=1 128", "128 is out of range for i8"),
        ("ui8=-1", "-1 is out of range for ui8"),
        ("f16=1e5", "1e5 is out of range for f16"),
        ("2xi1=1 2", "'2' is not an i1 value"),
        # past even f64 (float() made it inf), Python's digit separators and non-ASCII digits
        ("f32=1e400", "1e400 is out of range for f32"),
        ("f64=-1e400", "-1e400 is out of range for f64"),
        ("3xi32=1_000 2 3", "'1_000' is not an integer"),
        ("f32=1_0.5", "'1_0.5' is not a number"),
        ("i32=\u0661\u0662", "'\u0661\u0662' is not an integer"),
        ("\u0663xf32=1", "bad shape"),
    ],
)
def test_bad_strings_say_what_is_wrong(text, message):
    with pytest.raises(InputError, match=message):
        parse_value(text)


def test_npy_input_keeps_shape_and_dtype(tmp_path):
    for name in ["i1", "i32", "ui16", "f16", "f64"]:
        array = random_array(name, (5, 3))
        np.save(tmp_path / "x.npy", array)
        loaded = parse_value(f"@{tmp_path / 'x.npy'}")
        assert loaded.dtype == array.dtype
        np.testing.assert_array_equal(loaded, array)


def test_big_endian_npy_becomes_native(tmp_path):
    array = rng.standard_normal((4, 9)).astype(">f4")
    np.save(tmp_path / "be.npy", array)
    loaded = parse_value(f"@{tmp_path / 'be.npy'}")
    assert loaded.dtype == np.float32
    np.testing.assert_array_equal(loaded, array)


def test_bad_npy_inputs(tmp_path):
    with pytest.raises(InputError, match="cannot read .*missing.npy"):
        parse_value(f"@{tmp_path / 'missing.npy'}")
    (tmp_path / "junk.npy").write_bytes(b"not a numpy file at all")
    with pytest.raises(InputError, match="junk.npy is not a readable .npy file"):
        parse_value(f"@{tmp_path / 'junk.npy'}")
    np.save(tmp_path / "cut.npy", np.arange(10, dtype=np.float32))  # read without numpy
    (tmp_path / "cut.npy").write_bytes((tmp_path / "cut.npy").read_bytes()[:-4])
    with pytest.raises(InputError, match="cut.npy is not a readable .npy file .*10 elements"):
        parse_value(f"@{tmp_path / 'cut.npy'}")
    np.save(tmp_path / "c.npy", np.ones(3, np.complex64))
    with pytest.raises(InputError, match="complex64 elements"):
        parse_value(f"@{tmp_path / 'c.npy'}")


@pytest.mark.parametrize(
    "value, text",
    [
        (3.0, "3"),
        (0.5, "0.5"),
        (1e10, "1e+10"),
        (-2.5e-7, "-2.5e-07"),
        (1234567.0, "1234567"),
        (1e6, "1e+06"),
        (100000.0, "100000"),
        (0.0001, "0.0001"),
        (1e-5, "1e-05"),
        (-0.0, "-0"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
    ],
)
def test_floats_print_like_percent_g_without_rounding(value, text):
    assert format_element(value, F64) == text
    assert format_element(float(np.float32(value)), F32) == text


def test_float32_prints_shortest_round_trip_text():
    assert format_element(float(np.float32(0.1)), F32) == "0.1"
    assert format_element(float(np.float32(1 / 3)), F32) == "0.33333334"
    assert format_element(1 / 3, F64) == "0.3333333333333333"


def test_array_layout_matches_iree():
    assert format_array(np.array([3, 4, 5, 6], np.float32)) == "4xf32=3 4 5 6"
    assert format_array(np.arange(1, 7, dtype=np.float32).reshape(2, 3)) == "2x3xf32=[1 2 3][4 5 6]"
    assert format_array(np.float32(2).reshape(())) == "f32=2"
    assert format_array(np.array([True, False])) == "2xi1=1 0"
    assert (
        format_array(np.arange(8, dtype=np.uint8).reshape(2, 2, 2))
        == "2x2x2xui8=[[0 1][2 3]][[4 5][6 7]]"
    )


def test_elision_follows_print_max_element_count():
    array = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert format_array(array, max_elements=5) == "3x4xi32=[0 1 2 3][4...][...]"
    assert format_array(array, max_elements=0) == "3x4xi32=[...][...][...]"
    assert format_array(np.arange(2000, dtype=np.int64)).endswith(" 1023...")


def test_dtype_spellings():
    assert [dtype_spelling(np.dtype(t)) for t in (np.float16, np.bool_, np.int64, np.uint32)] == [
        "f16",
        "i1",
        "i64",
        "ui32",
    ]
    assert dtype_spelling(np.dtype(np.complex64)) == "complex64"  # no IREE spelling: numpy's name


def test_output_specs():
    assert parse_output_spec("") == OutputSpec("ignore")
    assert parse_output_spec("-") == OutputSpec("print")
    assert parse_output_spec("@y.npy") == OutputSpec("write", "y.npy")
    assert parse_output_spec("+y.npy") == OutputSpec("append", "y.npy")
    for bad in ["y.npy", "@", "+"]:
        with pytest.raises(InputError, match="is not an output spec"):
            parse_output_spec(bad)


def test_npy_write_then_append(tmp_path):
    path = tmp_path / "y.npy"
    first, second = random_array("f32", (37, 53)), random_array("i32", (11,))
    save_npy(OutputSpec("write", str(path)), HostArray.from_numpy(random_array("f64", (2,))))
    save_npy(OutputSpec("write", str(path)), HostArray.from_numpy(first))  # overwrites
    save_npy(OutputSpec("append", str(path)), HostArray.from_numpy(second))
    with open(path, "rb") as f:
        np.testing.assert_array_equal(np.load(f), first)
        np.testing.assert_array_equal(np.load(f), second)
        assert f.read() == b""


def test_the_formatter_prints_every_float_as_numpy_does():
    """The numpy-free shortest-digits formatter against numpy's own printing (numpy_reference):
    every f16 bit pattern; for f32 and f64 the sign, exponent and mantissa edges of every
    exponent (subnormals, powers of two with their lopsided rounding interval, the largest
    finite values) and random bit patterns."""
    from numpy_reference import element_text

    f16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    edges32 = np.array([(s << 31) | (e << 23) | m for s in (0, 1) for e in range(256)
                        for m in (0, 1, 2, 3, 0x400000, 0x7FFFFE, 0x7FFFFF)], np.uint32)
    f32 = np.concatenate([edges32, rng.integers(0, 1 << 32, 20000, dtype=np.uint64)
                          .astype(np.uint32)]).view(np.float32)
    edges64 = np.array([(s << 63) | (e << 52) | m for s in (0, 1) for e in range(0, 2048, 7)
                        for m in (0, 1, (1 << 52) - 1)], np.uint64)
    f64 = np.concatenate([edges64, rng.integers(0, 1 << 64, 20000, dtype=np.uint64)]).view(np.float64)
    for values, name in ((f16, "f16"), (f32, "f32"), (f64, "f64")):
        element_type = BY_NAME[name]
        wrong = [(v, format_element(float(v), element_type), element_text(v)) for v in values
                 if format_element(float(v), element_type) != element_text(v)]
        assert wrong == [], f"{name}: {len(wrong)} differ, e.g. {wrong[:3]}"


def test_arrays_and_host_arrays_print_alike():
    """format_array of a numpy array and of the same values as a HostArray: one formatter."""
    for name in ["i1", "i8", "ui64", "f16", "f32", "f64"]:
        array = random_array(name, (3, 4, 5))
        assert format_array(HostArray.from_numpy(array), 33) == format_array(array, 33)


def test_float_spellings_iree_takes():
    values = np.asarray(parse_value("8xf32=inf -inf nan +INF 1. .5 -0 2.5e-3"))
    np.testing.assert_array_equal(values, np.array([np.inf, -np.inf, np.nan, np.inf, 1, 0.5, -0.0,
                                                    2.5e-3], np.float32))
    assert np.signbit(values[6])
