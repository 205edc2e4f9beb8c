"""Removes costs of moto_server's that grow with the load and change no
answer. Beside four CPU-bound processes on 2 cores they were more than half
of the demo's emulator CPU, and the demo's run time is that CPU.
"""
import collections
import logging
import os
import threading
import time


def apply():
    _sqs_clock()
    _sqs_retention()
    _dispatch_cache()
    _dynamodb_parse_cache()
    _dynamodb_traversal()
    _dynamodb_update_validation()
    _dynamodb_condition_reparse()
    _dynamodb_transaction_backup()
    _action_lookup_cache()
    _quiet_request_log()


def _sqs_clock():
    """moto's SQS asks the time through datetime arithmetic, once per message
    for every visibility and delay check: a queue's attributes (read by each
    send) walk all its messages three times that way, 37 ms for 1,300
    messages. time.time() is the same clock."""
    from moto.core import utils
    from moto.sqs import models

    def unix_time(dt=None):
        return time.time() if dt is None else utils.unix_time(dt)

    def unix_time_millis(dt=None):
        return unix_time(dt) * 1000.0

    models.unix_time, models.unix_time_millis = unix_time, unix_time_millis


def _sqs_retention():
    """Each received message checked its retention period through
    get_queue_attributes, which computes every attribute of the queue: it
    now reads the one it needs."""
    from moto.sqs import models

    def is_message_valid_based_on_retention_period(self, queue_name, message):
        queue = self.get_queue(queue_name)
        retain_until = int(queue.message_retention_period) + message.sent_timestamp / 1000
        return retain_until > models.unix_time()

    models.SQSBackend.is_message_valid_based_on_retention_period = (
        is_message_valid_based_on_retention_period
    )


def _dispatch_cache():
    """Every request, under the dispatcher's one lock, looked its service up
    by listing moto's package directory and matching a few hundred URL
    patterns. The answer for a host never changes; it is remembered."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    lookup = DomainDispatcherApplication.get_backend_for_host
    backends = {}

    def get_backend_for_host(self, host):
        # Called under self.lock, so the dict needs no lock of its own.
        if host not in backends:
            backends[host] = lookup(self, host)
        return backends[host]

    DomainDispatcherApplication.get_backend_for_host = get_backend_for_host


def _dynamodb_parse_cache():
    """Every UpdateItem lexed its condition and parsed its update expression
    (twice). Both depend on the expression's text alone, and the lock
    protocol sends a handful of texts with other values. The lexed condition
    is copied for each use (the parser consumes it); the update expression's
    tree is only read, and copied by the validator that rewrites it."""
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    lex = ConditionExpressionParser._lex_condition_expression
    lexed = {}

    def _lex_condition_expression(self):
        key = self.condition_expression
        if key not in lexed:
            _bound(lexed)
            lexed[key] = tuple(lex(self))
        return collections.deque(n._replace(children=list(n.children)) for n in lexed[key])

    ConditionExpressionParser._lex_condition_expression = _lex_condition_expression

    make = UpdateExpressionParser.make.__func__
    parsed = {}

    def make_update_expression(cls, expression_str):
        if expression_str not in parsed:
            _bound(parsed)
            parsed[expression_str] = make(cls, expression_str)
        return parsed[expression_str]

    UpdateExpressionParser.make = classmethod(make_update_expression)


def _dynamodb_traversal():
    """Every UpdateItem validates its update expression's tree with ten
    depth-first passes (twice for a new item), and each pass asked, for
    every node, isinstance against abstract classes (slow: abc's
    __instancecheck__) and rebuilt its processing map, twice for a node it
    processes. The pass is the same walk: which processor a node gets is
    the first of the map whose class it is an instance of, now looked up
    once per node class in each pass."""
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node

    no_hook = DepthFirstTraverser.pre_processing_of_child
    is_node = _class_test(Node)

    def traverse(self, node):
        hook = None
        if type(self).pre_processing_of_child is not no_hook:
            hook = self.pre_processing_of_child
        processors = list(self._processing_map().items())
        chosen = {}

        def walk(node, child_id):
            cls = type(node)
            parent_node = node.parent
            children = node.children
            if children is not None:
                for i, child_node in enumerate(children):
                    if hook is not None:
                        hook(node, i)
                    if is_node(type(child_node)):
                        walk(child_node, i)
            fn = chosen.get(cls, chosen)
            if fn is chosen:
                fn = chosen[cls] = next((f for key, f in processors if issubclass(cls, key)), None)
            if fn is not None:
                node = fn(node)
                node.parent = parent_node
                if parent_node:
                    parent_node.children[child_id] = node
            return node

        if not is_node(type(node)):
            return node
        return walk(node, -1)

    DepthFirstTraverser.traverse = traverse

    # The one hook of a pass, ExpressionAttributeResolvingProcessor's: the
    # same isinstance test, by class.
    from moto.dynamodb.parsing import validators

    resolving = validators.ExpressionAttributeResolvingProcessor
    is_action = _class_test((
        validators.UpdateExpressionSetAction,
        validators.UpdateExpressionRemoveAction,
        validators.UpdateExpressionDeleteAction,
        validators.UpdateExpressionAddAction,
    ))

    def pre_processing_of_child(self, parent_node, child_id):
        if is_action(type(parent_node)):
            self.resolving = child_id != 0

    resolving.pre_processing_of_child = pre_processing_of_child


def _class_test(classes):
    """isinstance(x, classes) as a test of type(x), remembered per class:
    moto's tree nodes are of abstract classes, whose isinstance goes through
    abc's slower __instancecheck__. No class is registered with them."""
    known = {}

    def test(cls):
        r = known.get(cls)
        if r is None:
            r = known[cls] = issubclass(cls, classes)
        return r

    return test


def _dynamodb_update_validation():
    """Before it changes an item, UpdateItem deep-copies the update
    expression's tree (the copy.deepcopy of a few dozen nodes, each with its
    parent: a millisecond) and runs three checks that read nothing but the
    tree, the attribute names and the table's key attributes: one action of
    each kind, no overlapping paths, no key attribute updated. The tree
    comes from the parse cache (one per text), so a check that passed for a
    tree, names and keys passes again: it is remembered, and skipped. A
    check that failed is not remembered, and fails again. The tree is copied
    node by node, as deepcopy would (each node's attributes, its children,
    its parent the copy of its parent), and by deepcopy itself when it holds
    anything but nodes, strings, numbers and None."""
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.ast_nodes import Node

    static = (validators.ActionCountValidator, validators.OverlappingPathsValidator, validators.UpdateHashRangeKeyValidator)
    passed = {}
    plain = (str, int, float, bool, type(None))
    is_node = _class_test(Node)

    class _Irregular(Exception):
        pass

    def clone(node, parent):
        cls = type(node)
        if not is_node(cls):
            if cls in plain:
                return node
            raise _Irregular()
        new = object.__new__(cls)
        attrs = dict(node.__dict__)
        for name, value in attrs.items():
            if name not in ("children", "parent") and type(value) not in plain:
                raise _Irregular()
        new.__dict__ = attrs
        new.parent = parent
        if node.children is not None:
            if type(node.children) is not list:
                raise _Irregular()
            new.children = [clone(c, new) for c in node.children]
            for c in node.children:
                if is_node(type(c)) and c.parent is not node:
                    raise _Irregular()
        return new

    def copy_tree(expression):
        if is_node(type(expression)) and expression.parent is None:
            try:
                return clone(expression, None)
            except _Irregular:
                pass
        return validators.deepcopy(expression)

    def __init__(self, expression, expression_attribute_names, expression_attribute_values, item, table):
        self.expression_attribute_names = expression_attribute_names
        self.expression_attribute_values = expression_attribute_values
        self.item = item
        self.table = table
        self.processors = self.get_ast_processors()
        self.node_to_validate = copy_tree(expression)
        self._sqs_once_static = None
        first = tuple(type(p) for p in self.processors[: len(static)])
        if first == static and isinstance(expression, Node):
            names = tuple(sorted((expression_attribute_names or {}).items()))
            key = (expression, names, tuple(table.table_key_attrs))
            if key in passed:
                self.processors = self.processors[len(static):]
            else:
                self._sqs_once_static = key

    def validate(self):
        n = self.node_to_validate
        for i, processor in enumerate(self.processors):
            n = processor.traverse(n)
            if i == len(static) - 1 and self._sqs_once_static is not None:
                # Holding the tree as a key keeps it alive: its id is
                # never another tree's.
                _bound(passed)
                passed[self._sqs_once_static] = True
        return n

    validators.UpdateExpressionValidator.__init__ = __init__
    validators.UpdateExpressionValidator.validate = validate


def _dynamodb_condition_reparse():
    """UpdateItem parsed its condition twice with the same text, names and
    values: the request handler, for the names and values it uses, then
    the backend, to evaluate it (0.4 ms each). The last parses are
    remembered by all three, so the second takes the first's tree (read,
    never changed, by the evaluation) and the names and values it found. A
    parse that fails is not remembered, and fails again."""
    import json

    from moto.dynamodb.comparisons import ConditionExpressionParser

    parse = ConditionExpressionParser.parse
    recent = {}

    def parse_once(self):
        if not self.condition_expression:
            return parse(self)
        try:
            key = (
                self.condition_expression,
                json.dumps(self.expression_attribute_names, sort_keys=True),
                json.dumps(self.expression_attribute_values, sort_keys=True),
            )
        except (TypeError, ValueError):
            return parse(self)
        hit = recent.get(key)
        if hit is None:
            names, values = len(self.expr_attr_names_found), len(self.expr_attr_values_found)
            op = parse(self)
            if len(recent) >= _RECENT_MAX:
                recent.clear()
            recent[key] = (op, tuple(self.expr_attr_names_found[names:]), tuple(self.expr_attr_values_found[values:]))
            return op
        op, names, values = hit
        self.expr_attr_names_found.extend(names)
        self.expr_attr_values_found.extend(values)
        return op

    ConditionExpressionParser.parse = parse_once


# _RECENT_MAX bounds the remembered condition parses: each request's own
# second parse is all they are for.
_RECENT_MAX = 256


def _action_lookup_cache():
    """Every request listed its response class's methods with
    inspect.getmembers, to check that the action is one: a class's methods
    do not change while the server runs, so the list is made once."""
    from moto.core import responses

    names_of = responses.method_names_from_class
    names = {}

    def method_names_from_class(clazz):
        if clazz not in names:
            names[clazz] = names_of(clazz)
        return names[clazz]

    responses.method_names_from_class = method_names_from_class


def _dynamodb_transaction_backup():
    """TransactWriteItems deep-copied every table it writes, all of its
    items, to put the copy back if one of its writes failed: a cost that
    grows with the table (the demo's -tx ran three times slower, its
    invocations near their timeout), and a rollback that put back the whole
    table undid the writes other requests had made to it meanwhile. It now
    copies the items it writes, and a rollback puts back only those."""
    from moto.dynamodb import models
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    real_copy = models.copy
    tx = threading.local()

    class _Copy:
        """models' copy module: within transact_write_items a table is not
        copied (its items are, below); every other copy as before."""

        def __getattr__(self, name):
            return getattr(real_copy, name)

        @staticmethod
        def deepcopy(x, memo=None):
            if getattr(tx, "active", False) and isinstance(x, Table):
                return x
            return real_copy.deepcopy(x, memo)

    models.copy = _Copy()
    transact = DynamoDBBackend.transact_write_items

    def transact_write_items(self, transact_items):
        backup = []
        for item in transact_items:
            try:
                op_type, op = next(iter(item.items()))
                table = self.get_table(op["TableName"])
                if op_type == "Put":
                    attrs = op["Item"]
                    key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                    if table.range_key_attr is not None:
                        key[table.range_key_attr] = attrs[table.range_key_attr]
                else:
                    key = op["Key"]
                current = self.get_item(table.name, key)
            except Exception:
                # moto refuses this write itself, before or without applying it.
                continue
            backup.append((table.name, key, None if current is None else current.to_json()["Attributes"]))
        tx.active = True
        try:
            return transact(self, transact_items)
        except Exception:
            for name, key, attrs in reversed(backup):
                if attrs is not None:
                    self.put_item(name, attrs)
                elif self.get_item(name, key) is not None:
                    self.delete_item(name, key)
            raise
        finally:
            tx.active = False

    DynamoDBBackend.transact_write_items = transact_write_items


# _CACHE_MAX bounds each parse cache: a server that sees ever new texts
# (a test suite's) starts over rather than grow without end.
_CACHE_MAX = 4096


def _bound(cache):
    if len(cache) >= _CACHE_MAX:
        cache.clear()


def _quiet_request_log():
    """Every request was logged to stderr under the logging lock; only when
    MOTO_SERVER_LOG is set (the Go side then shows moto_server's stderr)."""
    if not os.environ.get("MOTO_SERVER_LOG"):
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
