"The experiments' harness: every experiment builds its engines through `serve`, and the P/D proxy loop is written once (`PDPair.step`)."
import ast
from pathlib import Path
import vllm_pd_spec

PKG = Path(vllm_pd_spec.__file__).parent
BUILDERS = {'LLMEngine', 'PDPair', 'build_toy_engine', 'run_standalone'}  # the classes, and the engine floor's builders (`PDPair.from_engines` wraps engines built elsewhere)
# a module that still builds engines by hand, and why; the test fails once it no longer does, so the entry goes
BY_HAND = {}
SERVE = ('serve',)  # the kit's builder

def _called(call:ast.Call)->str|None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None

def _functions(tree:ast.Module):
    "Each module-level function and method, with its name (nested functions belong to the one they are in)."
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)): yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for m in node.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)): yield f'{node.name}.{m.name}', m

def engines_built(source:str, # a module's source
                  allowed:tuple=(), # functions that may build engines
                 )->list:
    "`(function, line, builder)` for every engine a module builds outside `allowed` (module level included)."
    tree, out = ast.parse(source), []
    inside = {id(n) for name, fn in _functions(tree) if name in allowed for n in ast.walk(fn)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and _called(n) in BUILDERS and id(n) not in inside:
            fn = next((name for name, f in _functions(tree) if n in ast.walk(f)), '<module>')
            out.append((fn, n.lineno, _called(n)))
    return out

def engines_stepped(source:str)->list:
    "`(function, receivers)` for every function that steps more than one engine: a proxy loop."
    out = []
    for name, fn in _functions(ast.parse(source)):
        stepped = {ast.unparse(n.func.value) for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr == 'step' and not n.args and not n.keywords}
        if len(stepped) > 1: out.append((name, sorted(stepped)))
    return out

HAND_BUILT = '''
def burst(model, prompts):
    P = LLMEngine(make_config('mtp', 3, 'prefill', model=model), model, transport=t)
    D = LLMEngine(make_config('mtp', 3, 'decode', model=model), model, transport=t)
    for step in range(100):
        for o in (P.step() if P.has_work() else []): D.add_request(o)
        out = D.step()
'''

def test_rules_catch_a_hand_built_proxy():
    "The checks below can fail: a burst with its engines and its own loop is caught twice."
    assert [b for _, _, b in engines_built(HAND_BUILT)] == ['LLMEngine', 'LLMEngine']
    assert engines_stepped(HAND_BUILT) == [('burst', ['D', 'P'])]
    assert engines_built('def serve(): return PDPair()', allowed=('serve',)) == []

def test_experiments_build_engines_through_serve():
    "No experiment module builds an `LLMEngine` or a `PDPair` itself: the kit's `serve` builds them from the arm."
    found = {}
    for path in sorted((PKG / 'experiments').glob('*.py')):
        built = engines_built(path.read_text(), SERVE if path.name == 'common.py' else ())
        if built: found[path.name] = built
    assert set(found) == set(BY_HAND), {k: v for k, v in found.items() if k not in BY_HAND} or f'no longer built by hand: {set(BY_HAND) - set(found)}'
    common = (PKG / 'experiments' / 'common.py').read_text()
    assert {b for _, _, b in engines_built(common)} == {'LLMEngine', 'PDPair'}  # serve builds both

def test_proxy_loop_exists_once():
    "In the whole package, one function steps a prefill and a decode engine together: `PDPair.step`."
    found = {str(p.relative_to(PKG)): s for p in sorted(PKG.rglob('*.py')) if (s := engines_stepped(p.read_text()))}
    assert found == {'engine/llm_engine.py': [('step', ['self.D', 'self.P'])]}, found

def test_the_proxy_steps_as_generate_runs():
    "`add_request` and `step` give `generate`'s outputs; a hand-off passes `on_handoff`, an abort leaves nothing behind."
    from vllm_pd_spec.engine.llm_engine import PDPair
    ps = [[3, 4, 5, 6, 7, 8], [3, 4, 5, 9], [10, 11, 12, 13, 14]]
    want = PDPair('mtp', 2, block_size=4).generate(ps, 4)
    pair, seen = PDPair('mtp', 2, block_size=4), []
    pair.on_handoff = lambda o: seen.append(o.request_id) or dict(o.kv_transfer_params or {})
    for i, p in enumerate(ps): pair.add_request(f'r{i}', p, 4)
    pair.abort_request('r2')
    while pair.has_work(): pair.step()
    assert [pair.D.outputs[f'r{i}'] for i in range(2)] == want[:2] and seen == ['r0', 'r1']
    assert 'r2' not in pair.D.finished and not pair.prefilling and not pair.P.has_work()
