"""`kiln visualize` opened in headless Chromium (selenium + chromedriver, Debian's chromium and chromium-driver),
and `kiln trace` against the cost model's replay and the emulator.

The browser tests skip, saying why, when selenium, chromium or chromedriver is missing; .ci/run installs them.
Load times (navigation start to the load event) are printed, not asserted."""
import json
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter

import numpy as np
import pytest
from conftest import run

import kiln
from kiln.runtime import as_packed

REPORT_MODELS = [m for m in ("bert_layer", "resnet50") if m in kiln.models()]


def kiln_cmd():
    exe = shutil.which("kiln")
    if exe is None:
        pytest.fail("the kiln console script is not installed (pip install .)")
    return exe


# ---------------------------------------------------------------- the report file

@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    if not REPORT_MODELS:
        pytest.skip("needs bert_layer or resnet50 baked (the default KILN_MODELS)")
    d = tmp_path_factory.mktemp("reports")
    out = {}
    for m in REPORT_MODELS:
        path = d / f"{m}.html"
        r = run([kiln_cmd(), "visualize", m, "-o", path])
        assert r.returncode == 0, r.stderr
        assert f"wrote {path}" in r.stdout
        out[m] = path
    return out


@pytest.mark.parametrize("model", REPORT_MODELS)
def test_report_is_one_self_contained_file(reports, model):
    from kiln.visualize import network_references
    html = reports[model].read_text(encoding="utf-8")
    assert network_references(html) == []
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.IGNORECASE)
    assert not re.search(r"<script[^>]+src=|<link[^>]+stylesheet|@import|@font-face", html, re.IGNORECASE)
    assert "Content-Security-Policy" in html and "default-src 'none'" in html  # the page may not fetch anything
    data = json.loads(re.search(r'<script id="kiln-data" type="application/json">(.*?)</script>', html, re.S).group(1))
    m = kiln.load(model)
    assert len(data["nodes"]) == m.kernel_launches
    assert [n["kernel"] for n in data["nodes"]] == [k.kernel for k in m.kernels]  # launch order
    assert all(e["shape"] for e in data["edges"]) and len(data["edges"]) >= m.kernel_launches
    assert len(data["memory"]["tensors"]) == len(m.record["memory"]["tensors"])
    assert data["fusion"]["ir_ops_before"] == m.record["fusion"]["ir_ops_before"]
    assert sum(data["totals"]["time_by_type"].values()) == pytest.approx(1.0)
    assert "measured" not in data and all("cpu_ms" not in n for n in data["nodes"])  # no --profile, no measured data


def test_resnet50_report_names_its_top3_kernels_with_type_and_suggestion(reports):
    if "resnet50" not in reports:
        pytest.skip("resnet50 is not baked")
    html = reports["resnet50"].read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script id="kiln-data" type="application/json">(.*?)</script>', html, re.S).group(1))
    m = kiln.load("resnet50")
    rng = np.random.default_rng(0)
    m.run(rng.standard_normal(m.inputs[0][1]).astype(np.float32))
    per_kernel = Counter()
    for k in m.kernels:
        per_kernel[k.kernel] += k.simulated_cycles
    top3 = [k for k, _ in per_kernel.most_common(3)]
    rows = {b["kernel"]: b for b in data["bottlenecks"]}
    for k in top3:
        assert k in rows, (k, list(rows))
        assert rows[k]["type"] in ("Cube-bound", "Vector-bound", "MTE-bound", "latency-bound")
        assert rows[k]["suggestion"]
        if rows[k]["predicted_cycles"] is not None:  # a replayed suggestion: faster than what was built
            assert rows[k]["predicted_cycles"] < data["kernels"][k]["predicted_cycles"]
    assert all(b["share"] >= data["threshold"] for b in data["bottlenecks"] if b["above_threshold"])


# ---------------------------------------------------------------- in headless Chromium

def _browser_paths():
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("selenium is not installed (pip install .[test])")
    browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
                   None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip("headless browser tests need Chromium and chromedriver "
                    "(apt-get install chromium chromium-driver); missing: "
                    + ", ".join(n for n, p in (("chromium", browser), ("chromedriver", driver)) if p is None))
    return browser, driver


@pytest.fixture(scope="module")
def driver():
    browser, chromedriver = _browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    opts = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900",
              "--disable-extensions", "--no-first-run"):
        opts.add_argument(a)
    opts.binary_location = browser
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(chromedriver), options=opts)
    yield d
    d.quit()


def png_pixels(data: bytes) -> np.ndarray:
    """(h, w, channels) uint8 of an 8-bit non-interlaced PNG (what Chromium's screenshots are)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, []
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    assert depth == 8 and interlace == 0 and ctype in (0, 2, 4, 6), (depth, ctype, interlace)
    bpp = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, w * bpp + 1)
    out = np.zeros((h, w * bpp), np.uint8)
    prev = np.zeros(w * bpp, np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:
            cur = np.cumsum(line.reshape(w, bpp), axis=0).reshape(-1) & 255
        elif f == 2:
            cur = (line + prev) & 255
        else:  # Average / Paeth, byte by byte
            ln, up, c = line.tolist(), prev.tolist(), [0] * (w * bpp)
            for i in range(w * bpp):
                left = c[i - bpp] if i >= bpp else 0
                if f == 3:
                    c[i] = (ln[i] + ((left + up[i]) >> 1)) & 255
                else:
                    ul = up[i - bpp] if i >= bpp else 0
                    p = left + up[i] - ul
                    pa, pb, pc = abs(p - left), abs(p - up[i]), abs(p - ul)
                    c[i] = (ln[i] + (left if pa <= pb and pa <= pc else up[i] if pb <= pc else ul)) & 255
            cur = np.array(c, np.int32)
        out[y] = cur
        prev = cur.astype(np.int32)
    return out.reshape(h, w, bpp)


def _severe(driver) -> list:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


@pytest.mark.parametrize("model", REPORT_MODELS)
def test_report_in_headless_chromium(driver, reports, model, capsys):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    path = reports[model]
    _severe(driver)  # drop what earlier pages logged
    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script("var n = performance.getEntriesByType('navigation')[0]; "
                                   "return n && n.loadEventEnd > 0;"))
    nav = driver.execute_script("var n = performance.getEntriesByType('navigation')[0]; "
                                "return [n.domContentLoadedEventEnd - n.startTime, n.loadEventEnd - n.startTime];")
    with capsys.disabled():
        print(f"\n[kiln visualize] {model}: report {path.stat().st_size / 1024:.0f} KiB, load {nav[1]:.0f} ms "
              f"(DOMContentLoaded {nav[0]:.0f} ms) in headless Chromium")

    assert _severe(driver) == []  # no console errors (a CSP violation would be one)
    # no network request: no resource was fetched (the page, a file: URL, is the navigation itself)
    fetched = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name);")
    assert fetched == []

    m = kiln.load(model)
    nodes = driver.find_elements(By.CSS_SELECTOR, "#graph g.node")
    assert len(nodes) == m.kernel_launches
    assert driver.find_element(By.TAG_NAME, "html").get_attribute("data-rendered") == str(m.kernel_launches)
    assert len(driver.find_elements(By.CSS_SELECTOR, "#graph path.edge")) >= m.kernel_launches
    for i in (0, len(nodes) // 2, len(nodes) - 1):  # click kernels: the detail panel shows that kernel
        node = nodes[i]
        want = node.get_attribute("data-kernel")
        node.click()
        WebDriverWait(driver, 5).until(lambda d, want=want: d.find_elements(By.ID, "detail-kernel") and
                                       d.find_element(By.ID, "detail-kernel").text == want)
        detail = driver.find_element(By.ID, "detail")
        assert detail.get_attribute("data-kernel") == want
        assert "sel" in node.get_attribute("class")
        assert detail.find_elements(By.CSS_SELECTOR, "table.pipes tr")  # per-pipe cycles and utilisation
        assert detail.find_elements(By.CSS_SELECTOR, "svg.roof circle")  # roofline position
        text = detail.text
        assert "Instruction trace" in text or "INSTRUCTION TRACE" in text
        assert "[OPT] log" in text or "[OPT] LOG" in text
    rows = driver.find_elements(By.CSS_SELECTOR, "#bottleneck-table tr.click")
    assert len(rows) >= 3
    for r in rows:
        assert r.find_elements(By.CSS_SELECTOR, ".tag")
    assert not driver.find_elements(By.ID, "measured-total") and not driver.find_elements(By.ID, "cpu-share-head")
    mem = driver.find_elements(By.CSS_SELECTOR, "#memory-svg rect.tensor")
    assert len(mem) == len(m.record["memory"]["tensors"])
    assert driver.find_elements(By.CSS_SELECTOR, "#memory-svg #lower-bound")
    fusion = driver.find_element(By.ID, "fusion-summary").text
    assert f"{m.record['fusion']['ir_ops_before']} IR ops before fusion" in fusion
    assert f"{m.kernel_launches} kernel launches" in fusion

    driver.execute_script("window.scrollTo(0, 0);")
    px = png_pixels(driver.get_screenshot_as_png())
    colours = Counter(map(bytes, px[::4, ::4].reshape(-1, px.shape[2])))
    dominant = colours.most_common(1)[0][1] / sum(colours.values())
    assert len(colours) > 20 and dominant < 0.9, (len(colours), dominant)  # not blank, not one colour
    assert _severe(driver) == []


def test_visualize_serve_answers_on_localhost(tmp_path):
    if "bert_layer" not in kiln.models():
        pytest.skip("bert_layer is not baked")
    import urllib.request
    out = tmp_path / "r.html"
    p = subprocess.Popen([kiln_cmd(), "visualize", "bert_layer", "-o", str(out), "--serve", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in p.stdout:
            if line.startswith("serving "):
                url = line.split()[1]
                break
        assert url and url.startswith("http://127.0.0.1:"), p.stderr.read() if p.poll() is not None else url
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        assert body == out.read_text(encoding="utf-8")
    finally:
        p.terminate()
        p.wait(timeout=10)


# ---------------------------------------------------------------- measured profile (kiln visualize --profile)

PROFILE_MODEL = next((m for m in ("bert_layer", "resnet50") if m in kiln.models()), None)


def _report_data(path) -> dict:
    html = path.read_text(encoding="utf-8")
    return json.loads(re.search(r'<script id="kiln-data" type="application/json">(.*?)</script>', html, re.S).group(1))


def synthetic_profile(model: str) -> dict:
    """A kiln-profile/1 document written by hand from the manifest's model record: step i took 0.125 * (i + 1)
    ms (distinct per step), the simulated cycles are those of one seeded run, as `kiln bench --profile` records."""
    m = kiln.load(model)
    rng = np.random.default_rng(0)
    m.run(*[rng.standard_normal(shape).astype(np.float32) for _, shape in m.inputs])
    ks, steps = iter(m.kernels), []
    for i, s in enumerate(m.record["steps"]):
        k = next(ks) if s["kind"] == "kernel" else None
        steps.append({"index": i, "name": s["name"], "kernel": s["kernel"], "cpu_ms": 0.125 * (i + 1),
                      "simulated_cycles": k.simulated_cycles if k else None})
    return {"format": "kiln-profile/1", "model": m.name, "profile": kiln.manifest()["profile"], "isa": "avx2",
            "threads": 3, "repeat": 7, "date": "2026-11-30T10:30:00Z",
            "total_cpu_ms": sum(s["cpu_ms"] for s in steps) + 0.5, "simulated_cycles": m.simulated_cycles,
            "steps": steps}


def _num(text: str, unit: str) -> float:
    """The first number written before `unit` (en-US digits grouping) in `text`."""
    return float(re.search(r"([\d,]+(?:\.\d+)?)\s*" + re.escape(unit), text).group(1).replace(",", ""))


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    if PROFILE_MODEL is None:
        pytest.skip("needs bert_layer or resnet50 baked (the default KILN_MODELS)")
    d = tmp_path_factory.mktemp("profiled")
    doc = synthetic_profile(PROFILE_MODEL)
    prof = d / "p.json"
    prof.write_text(json.dumps(doc, indent=1))
    out = d / "r.html"
    r = run([kiln_cmd(), "visualize", PROFILE_MODEL, "--profile", prof, "-o", out])
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stdout and "measured (host emulation, p.json" in r.stdout
    return out, doc


def test_profile_is_folded_into_the_report_data(profiled):
    from kiln.visualize import network_references
    out, doc = profiled
    assert network_references(out.read_text(encoding="utf-8")) == []
    data = _report_data(out)
    ms = data["measured"]
    assert ms["file"] == "p.json" and ms["threads"] == 3 and ms["isa"] == "avx2" and ms["repeat"] == 7
    assert ms["total_cpu_ms"] == doc["total_cpu_ms"] and ms["date"] == doc["date"]
    all_ms = sum(s["cpu_ms"] for s in doc["steps"])
    assert ms["steps_cpu_ms"] == pytest.approx(all_ms)
    for n in data["nodes"]:  # each launch carries its own step's measurement
        st = doc["steps"][n["step"]]
        assert st["kernel"] == n["kernel"] and n["cpu_ms"] == st["cpu_ms"]
        assert n["measured_cycles"] == st["simulated_cycles"] == n["cycles"]  # same seeded run
    for b in data["bottlenecks"]:
        want = sum(s["cpu_ms"] for s in doc["steps"] if s["kernel"] == b["kernel"])
        assert b["cpu_ms"] == pytest.approx(want) and b["cpu_share"] == pytest.approx(want / all_ms)


def test_profile_in_headless_chromium(driver, profiled):
    from selenium.webdriver.common.by import By
    out, doc = profiled
    _check_measured_page(driver, out, doc)
    # the synthetic values, exactly: every launch's cpu_ms in its detail panel, every kernel's share in the table
    all_ms = sum(s["cpu_ms"] for s in doc["steps"])
    nodes = driver.find_elements(By.CSS_SELECTOR, "#graph g.node")
    data = _report_data(out)
    for node, n in zip(nodes, data["nodes"]):
        node.click()
        panel = driver.find_element(By.ID, "detail-measured").text
        st = doc["steps"][n["step"]]
        assert f"{st['cpu_ms']:,.3f} ms this launch" in panel, (n["name"], panel)
        assert f"{st['simulated_cycles']:,.0f} in the measured run" in panel
    for row in driver.find_elements(By.CSS_SELECTOR, "#bottleneck-table tr.click"):
        kernel = data["nodes"][int(row.get_attribute("data-launch"))]["kernel"]
        want = sum(s["cpu_ms"] for s in doc["steps"] if s["kernel"] == kernel)
        cell = row.find_element(By.CSS_SELECTOR, "td.cpu-share").text
        assert _num(cell, "%") == pytest.approx(100 * want / all_ms, abs=0.051), (kernel, cell)
        assert _num(cell, "ms") == pytest.approx(want, abs=5e-4), (kernel, cell)


def _check_measured_page(driver, path, doc):
    """The report at `path`, made with --profile `doc`: loads without console errors or fetches; the header shows
    the measured total and its origin; a clicked kernel's panel shows its measured CPU ms beside the simulated and
    predicted cycles; the bottleneck table has the measured CPU-share column."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    _severe(driver)
    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, 10).until(lambda d: d.find_element(By.TAG_NAME, "html").get_attribute("data-rendered"))
    assert _severe(driver) == []
    assert driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name);") == []
    head = driver.find_element(By.ID, "measured-total").text
    assert _num(head, "ms") == pytest.approx(doc["total_cpu_ms"], abs=0.0051), head
    for what in ("measured CPU", "host emulation", f"{doc['threads']} threads", doc["isa"], doc["date"],
                 f"median of {doc['repeat']} runs", "p.json"):
        assert what in head, (what, head)
    node = driver.find_elements(By.CSS_SELECTOR, "#graph g.node")[0]
    node.click()
    WebDriverWait(driver, 5).until(lambda d: d.find_elements(By.ID, "detail-measured"))
    panel = driver.find_element(By.ID, "detail-measured").text
    assert "measured CPU ms (host emulation)" in panel
    assert "in the measured run" in panel and "in this report's run" in panel and "predicted (cost model)" in panel
    first = next(s for s in doc["steps"] if s["kernel"] is not None)
    assert _num(panel, "ms this launch") == pytest.approx(first["cpu_ms"], abs=5e-4)
    assert driver.find_element(By.ID, "cpu-share-head").text == "measured CPU share"
    rows = driver.find_elements(By.CSS_SELECTOR, "#bottleneck-table tr.click")
    assert rows and all(re.search(r"\d%", r.find_element(By.CSS_SELECTOR, "td.cpu-share").text) for r in rows)
    assert "Measured: p.json" in driver.find_element(By.ID, "notes").text
    assert _severe(driver) == []


def _mutate(doc: dict, how: str):
    """(file text, words the error must name) for one way a profile can fail to match the baked model."""
    doc = json.loads(json.dumps(doc))
    n = len(doc["steps"])
    if how == "format":
        doc["format"] = "kiln-profile/2"
        return json.dumps(doc), ["format", "kiln-profile/2", "kiln-profile/1"]
    if how == "model":
        doc["model"] = "some_other_model"
        return json.dumps(doc), ["some_other_model", PROFILE_MODEL]
    if how == "step count":
        doc["steps"] = doc["steps"][:-1]
        return json.dumps(doc), [f"{n - 1} steps", f"has {n}"]
    if how == "step name":
        baked = doc["steps"][1]["name"]
        doc["steps"][1]["name"] = "renamed.op"
        return json.dumps(doc), ["step 1", "renamed.op", baked]
    if how == "cpu_ms":
        doc["steps"][2]["cpu_ms"] = "fast"
        return json.dumps(doc), ["step 2", "cpu_ms"]
    if how == "not json":
        return json.dumps(doc)[:-20], ["does not parse"]
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["format", "model", "step count", "step name", "cpu_ms", "not json"])
def test_mismatched_profile_exits_2_naming_the_file(tmp_path, how):
    if PROFILE_MODEL is None:
        pytest.skip("needs bert_layer or resnet50 baked")
    text, words = _mutate(synthetic_profile(PROFILE_MODEL), how)
    prof = tmp_path / "bad profile.json"
    prof.write_text(text)
    out = tmp_path / "r.html"
    r = run([kiln_cmd(), "visualize", PROFILE_MODEL, "--profile", prof, "-o", out])
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and str(prof) in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    assert not out.exists()  # nothing written


def _bench_lists_profile() -> bool:
    exe = shutil.which("kiln")
    return exe is not None and "--profile" in run([exe, "bench", "--help"]).stdout


@pytest.mark.skipif(not _bench_lists_profile(),
                    reason="`kiln bench --help` does not list --profile: this kiln (the installed console script) "
                           "has no `kiln bench MODEL --profile FILE` yet")
def test_bench_profile_then_visualize_profile(driver, tmp_path):
    if "bert_layer" not in kiln.models():
        pytest.skip("bert_layer is not baked")
    prof, out = tmp_path / "p.json", tmp_path / "r.html"
    r = run([kiln_cmd(), "bench", "bert_layer", "--profile", prof, "--peers", "ort", "--repeat", "2", "--warmup", "1"],
            timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(prof.read_text())
    steps = kiln.load("bert_layer").record["steps"]
    assert doc["format"] == "kiln-profile/1" and doc["model"] == "bert_layer" and doc["repeat"] == 2
    assert [s["name"] for s in doc["steps"]] == [s["name"] for s in steps]
    assert [s["kernel"] for s in doc["steps"]] == [s["kernel"] for s in steps]
    assert all(s["cpu_ms"] >= 0 for s in doc["steps"]) and doc["total_cpu_ms"] > 0
    assert all((s["simulated_cycles"] is None) == (s["kernel"] is None) for s in doc["steps"])
    r = run([kiln_cmd(), "visualize", "bert_layer", "--profile", prof, "-o", out])
    assert r.returncode == 0, r.stdout + r.stderr
    data = _report_data(out)
    assert data["measured"]["total_cpu_ms"] == doc["total_cpu_ms"]
    assert [n["cpu_ms"] for n in data["nodes"]] == [s["cpu_ms"] for s in doc["steps"] if s["kernel"] is not None]
    _check_measured_page(driver, out, doc)


def test_visualize_unknown_model_and_bad_threshold():
    assert run([kiln_cmd(), "visualize", "no_such_model"]).returncode == 2
    if kiln.models():
        assert run([kiln_cmd(), "visualize", kiln.models()[0], "--threshold", "2"]).returncode == 2


# ---------------------------------------------------------------- kiln trace

def _trace_cases():
    cases = []
    for model in kiln.models():
        rec = kiln.load(model).record
        recs = {k["name"]: k for k in kiln.manifest()["kernels"]}
        steps = [s for s in rec["steps"] if s["kind"] == "kernel"]
        multi = next((s for s in steps if len(recs[s["kernel"]].get("predicted_pipes") or {}) > 4), None)
        for s in (steps[0], multi):
            if s is not None and (model, s["name"]) not in cases:
                cases.append((model, s["name"]))
        if len(cases) >= 4:
            break
    return cases


TRACE_CASES = _trace_cases()


@pytest.mark.parametrize("model,launch", TRACE_CASES, ids=[f"{m}:{n}" for m, n in TRACE_CASES])
def test_trace_text_and_chrome_json_match_the_replay_and_the_emulator(model, launch, tmp_path):
    from codegen.families.registry import predict
    from kiln import trace
    rec = trace.find_kernel(model, launch)[2].to_json()
    out = tmp_path / "t.json"
    r = run([kiln_cmd(), "trace", model, "--kernel", launch, "--limit", "7", "--chrome", out])
    assert r.returncode == 0, r.stderr
    assert rec["name"] in r.stdout and "cost model's replay" in r.stdout and "emulator" in r.stdout
    assert "core 0: first 7 of" in r.stdout and "per pipe" in r.stdout
    table = r.stdout.split("core 0: first", 1)[1].split("per pipe", 1)[0]
    assert len(re.findall(r"^\s+\d+\s+\d+\s+(?:S|V|M|MTE1|MTE2|MTE3|FIX)\s", table, re.M)) == 7

    doc = json.loads(out.read_text())
    prof = trace.profile_of_build()
    assert doc["otherData"]["kernel"] == rec["name"] and doc["otherData"]["clock_ghz"] == prof.clock_ghz
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert xs
    busy = Counter()
    for e in xs:
        assert e["dur"] >= 0 and e["ts"] >= 0 and isinstance(e["pid"], int)
        busy[names[(e["pid"], e["tid"])]] += e["dur"] * prof.clock_ghz * 1e3  # us -> cycles
    pred = predict(trace.spec_of(rec), rec["family"], rec["tiling"], prof)
    for pipe, c in pred.pipes.items():
        assert busy.get(pipe, 0.0) == pytest.approx(c.busy, rel=1e-9, abs=1e-6), pipe
        assert sum(1 for e in xs if names[(e["pid"], e["tid"])] == pipe) == c.instrs, pipe
    end = max(e["ts"] + e["dur"] for e in xs) * prof.clock_ghz * 1e3
    # the kernel ends after its last instruction's body by at most a pipe's head (the latency the core's end
    # waits for) and the launch overhead (issue 22: docs/ascend-model.md section 0)
    heads = max(prof.mte2_head, prof.mte1_head, prof.load3d_head, prof.bt_head, prof.fix_head, prof.mmad_head,
                prof.mte3_head, prof.vec_head)
    assert end < pred.cycles <= end + heads + prof.launch_cycles + prof.mixed_launch_cycles + 1e-6

    # and the emulator: same per-pipe instruction counts and busy cycles on a real run of the kernel
    k = kiln.kernel(rec["name"])
    k.run_packed(*[as_packed(np.zeros(t["shape"]), t["dtype"]) for t in rec["inputs"]])
    for pipe, st in k.last_stats["pipes"].items():
        assert busy.get(pipe, 0.0) == pytest.approx(st["busy_cycles"], rel=1e-9, abs=1e-6), pipe
    assert k.last_stats["cycles"] == pytest.approx(pred.cycles, rel=1e-9)


def test_trace_unknown_kernel_lists_the_models_kernels():
    if not kiln.models():
        pytest.skip("no baked model")
    model = kiln.models()[0]
    r = run([kiln_cmd(), "trace", model, "--kernel", "no_such_kernel"])
    assert r.returncode == 2 and "no kernel or launch named" in r.stderr
    assert kiln.load(model).kernels[0].kernel in r.stderr


def test_recording_does_not_change_the_prediction():
    from codegen.cost import model as costmodel
    from codegen.families.registry import predict, record
    from kiln import trace
    for rec in kiln.manifest()["kernels"][:12]:
        spec, prof = trace.spec_of(rec), trace.profile_of_build()
        plain = predict(spec, rec["family"], rec["tiling"], prof)
        recorded, launches = record(spec, rec["family"], rec["tiling"], prof)
        # recording replays every block; the plain prediction adds a core's identical blocks once steady
        # (cost/steady.py): the same fractional cycles summed in another order, at most an ulp or two apart
        assert recorded.cycles == pytest.approx(plain.cycles, rel=1e-12, abs=0) and launches
        assert costmodel.current_mode() == costmodel.ReplayMode()  # recording is off again
        assert sum(len(s) for _, _, cores in launches for s in cores.values()) == \
            sum(c.instrs for c in plain.pipes.values())
