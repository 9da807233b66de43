"""Every engine switch reaches the engine through its config or its constructor, never by an assignment from outside.

The walk reads the package, the tools and the notebooks' code cells (their abstract syntax trees, nothing is run) and
refuses three forms:
* `X.attr = ...` (or `setattr(X, ...)`) where `X` is a class or a module of the package and the assignment is not in the
  body of class `X` itself: a class attribute or a module global set from outside;
* `obj.method = ...` (or `setattr(obj, 'method', ...)`) where `method` is a method of a class of the engine: a method
  replaced on a live object;
* `engine.runner.attr = ...` (the same through `.scheduler`, `.connector`, `.worker`, `.kv_cache_manager`, or a name bound
  to one of them): a part of a built engine changed from outside it;
* `obj.switch = ...` where `switch` names an engine switch (a field of `RunnerConfig`, a scheduler switch of
  `SchedulerConfig`, a field of `KVTransferConfig`, the callbacks and per-instance switches they replaced) on any object
  but `self`: a switch set on a built object instead of given to it.

The names the config validates the row rule, the input backend and the connector path against are the contracts', the
kernels' and the scheduler's own."""
import ast, json
from dataclasses import fields
from pathlib import Path
import pytest
from vllm_pd_spec import config as C

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / 'vllm_pd_spec'
PARTS = ('runner', 'scheduler', 'connector', 'worker', 'kv_cache_manager')  # the parts of a built engine
SWITCHES = ({f.name for f in fields(C.RunnerConfig)} | {f.name for f in fields(C.KVTransferConfig)}
            | {'connector_path', 'reconcile_when_empty', 'kv_holding_first', 'reserve_spec_step_blocks', 'drop_group_ids'}
            | {'on_stale_reprefill', 'uses_connector_path', 'truncates_block_hashes', '_graph_eager_test', 'use_eagle', 'history'})

STAND_INS = {  # (file, object): not an engine object of the package
    ('nbs/39_nixl_transport.ipynb', 'ns'): 'a SimpleNamespace standing in for a transport without a NIXL agent',
    ('tools/vllm_gpu/experiments.py', 'S.Scheduler'): "vLLM's own scheduler, counted where the tool runs vLLM itself",
}

def package_files()->list: return sorted(p for p in PACKAGE.rglob('*.py') if p.name != '_modidx.py')
def tool_files()->list: return sorted((ROOT / 'tools').rglob('*.py'))
def notebooks()->list: return sorted((ROOT / 'nbs').glob('*.ipynb'))

def notebook_trees(nb:Path)->list:
    "The notebook's code cells that parse as Python (directives and magics dropped)."
    out = []
    for cell in json.loads(nb.read_text())['cells']:
        if cell['cell_type'] != 'code': continue
        src = '\n'.join(l for l in ''.join(cell['source']).splitlines() if not l.lstrip().startswith(('%', '!')))
        try: out.append(ast.parse(src))
        except SyntaxError: pass
    return out

def sources()->dict:
    "`{name: [trees]}` of every file the walk reads."
    out = {str(p.relative_to(ROOT)): [ast.parse(p.read_text())] for p in package_files() + tool_files()}
    out.update({str(nb.relative_to(ROOT)): notebook_trees(nb) for nb in notebooks()})
    return out

def _patched_class(fn:ast.FunctionDef)->str|None:
    "The class a fastcore `@patch` function adds a method to (its `self` annotation)."
    if not any((isinstance(d, ast.Name) and d.id == 'patch') or (isinstance(d, ast.Call) and getattr(d.func, 'id', None) == 'patch')
               for d in fn.decorator_list): return None
    a = fn.args.args[0].annotation if fn.args.args else None
    return a.id if isinstance(a, ast.Name) else None

def _is_property(fn:ast.FunctionDef)->bool:
    return any(getattr(d, 'id', None) == 'property' or 'as_prop' in ast.unparse(d) for d in fn.decorator_list)

def package_classes()->tuple:
    "`(class names, method names of the engine's classes)` of the package: properties and names also given data (`self.x = value`) are not methods."
    classes, methods, data = set(), set(), set()
    for p in package_files():
        engine = 'engine' in p.relative_to(PACKAGE).parts
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                classes.add(node.name)
                if engine: methods |= {n.name for n in node.body if isinstance(n, ast.FunctionDef) and not _is_property(n)}
            elif engine and isinstance(node, ast.FunctionDef) and _patched_class(node) and not _is_property(node): methods.add(node.name)
            elif isinstance(node, ast.FunctionDef) and _is_property(node): data.add(node.name)
            for obj, attr in _targets(node):
                if getattr(obj, 'id', None) == 'self' and not isinstance(getattr(node, 'value', None), ast.Lambda): data.add(attr)
    return classes, methods - data - {'__init__', '__post_init__', '__repr__', '__len__', '__eq__', '__hash__'}

def module_names(trees:list)->set:
    "Names the trees bind to modules of the package (`from ..model import model as M`, `import vllm_pd_spec.x as y`)."
    mods = {p.stem for p in package_files()} | {p.name for p in PACKAGE.rglob('*') if p.is_dir()}
    out = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or '').startswith('vllm_pd_spec')):
                out |= {a.asname or a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.Import):
                out |= {a.asname for a in node.names if a.name.startswith('vllm_pd_spec') and a.asname}
                out |= {'vllm_pd_spec' for a in node.names if a.name.startswith('vllm_pd_spec') and not a.asname}
    return out

def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)): node = node.value if not isinstance(node, ast.Call) else node.func
    return node

def _targets(node)->list:
    "The expressions an assignment or a `setattr` call writes: `(object, attribute name or None)`."
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        ts, out = node.targets if isinstance(node, ast.Assign) else [node.target], []
        while ts:
            t = ts.pop()
            if isinstance(t, (ast.Tuple, ast.List)): ts += t.elts
            elif isinstance(t, ast.Attribute): out.append((t.value, t.attr))
        return out
    if isinstance(node, ast.Call) and getattr(node.func, 'id', None) == 'setattr' and len(node.args) >= 2:
        name = node.args[1].value if isinstance(node.args[1], ast.Constant) else None
        return [(node.args[0], name)]
    return []

def part_names(trees:list)->set:
    "Names bound to a part of a built engine (`kvm = engine.scheduler.kv_cache_manager`)."
    out = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr in PARTS \
               and getattr(_root(node.value), 'id', None) != 'self':
                out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out

def offences(trees:list, classes:set, methods:set, name:str='')->list:
    "Each refused assignment of `trees` (the file `name`), in words."
    outside, parts, out = classes | module_names(trees), part_names(trees), []
    def walk(node, enclosing:tuple):
        if isinstance(node, ast.ClassDef): enclosing = enclosing + (node.name,)
        for obj, attr in _targets(node):
            where = f'line {node.lineno}: {ast.unparse(obj)}.{attr or "?"}'
            if (name, ast.unparse(obj)) in STAND_INS: continue
            if isinstance(obj, ast.Name) and obj.id in outside and obj.id not in enclosing:
                out.append(f'{where}: an attribute of the package\'s {obj.id} set from outside it')
            elif attr in methods and not (isinstance(obj, ast.Name) and obj.id in ('self', 'cls') and attr.startswith('__')):
                out.append(f'{where}: method {attr!r} replaced on a live object')
            elif isinstance(obj, ast.Attribute) and obj.attr in PARTS and getattr(_root(obj), 'id', None) != 'self':
                out.append(f'{where}: a built engine\'s {obj.attr} changed from outside')
            elif isinstance(obj, ast.Name) and obj.id in parts:
                out.append(f'{where}: a built engine\'s part ({obj.id}) changed from outside')
            elif attr in SWITCHES and not (isinstance(obj, ast.Name) and obj.id in ('self', 'cls')):
                out.append(f'{where}: switch {attr!r} set on a built object')
            elif attr is None and not (isinstance(obj, ast.Name) and obj.id == 'self'):
                if isinstance(obj, ast.Attribute) and obj.attr in PARTS: out.append(f'{where}: setattr on a built engine\'s {obj.attr}')
        for child in ast.iter_child_nodes(node): walk(child, enclosing)
    for tree in trees: walk(tree, ())
    return out

def test_the_walk_finds_each_form():
    "Each refused form is found, and what is allowed passes (a test must be able to fail)."
    classes, methods = {'ModelRunner', 'Scheduler'}, {'execute_model', 'schedule'}
    bad = '''
from vllm_pd_spec.model import model as M
ModelRunner.enforce_eager = False
def f(engine):
    M.PAGED_ATTENTION = 'rows'
    engine.runner.execute_model = lambda so: None
    engine.scheduler.kv_holding_first = False
    setattr(engine.runner, 'schedule', None)
    setattr(Scheduler, name, 1)
    kvm = engine.scheduler.kv_cache_manager
    kvm.free_blocks = 0
    runner.reprefill_state = 'reset on add'
'''
    found = offences([ast.parse(bad)], classes, methods)
    assert len(found) == 8, found
    ok = '''
class ModelRunner:
    enforce_eager = False
    def __init__(self, cfg): self.enforce_eager = cfg.enforce_eager; self.schedule_count = 0
@dataclass(frozen=True)
class C:
    def __post_init__(self): object.__setattr__(self, 'x', 1)
'''
    assert offences([ast.parse(ok)], classes, methods) == []

def test_no_switch_assigned_from_outside():
    "No engine switch is a class attribute or module global set from outside, no method is replaced on a live engine object, no built engine's part is changed."
    classes, methods = package_classes()
    assert {'execute_model', 'schedule', 'update_from_output'} <= methods and {'ModelRunner', 'Scheduler', 'LLMEngine'} <= classes
    found = {name: o for name, trees in sources().items() if (o := offences(trees, classes, methods, name))}
    assert found == {}, '\n'.join(f'{name}: {line}' for name, o in found.items() for line in o)

def test_config_names_are_the_code_s():
    "The names the config accepts are the keys the code looks them up by."
    from vllm_pd_spec.contracts.rows import ROW_RULES
    from vllm_pd_spec.kernels.assemble import ASSEMBLE_BACKENDS
    from vllm_pd_spec.engine.scheduler import CONNECTOR_PATH_RULES
    assert C.ROW_RULE_NAMES == tuple(ROW_RULES) and C.INPUT_BACKENDS == ASSEMBLE_BACKENDS and C.CONNECTOR_PATHS == tuple(CONNECTOR_PATH_RULES)
