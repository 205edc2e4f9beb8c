# Runs the code paths python/sqs_once_speed.py changes, in-process, and
# prints one JSON object: what they answered (which must not change) and
# what they cost (which must). Run by speed_test.go with and without the
# patches.
import json
import time

from moto.core import DEFAULT_ACCOUNT_ID as ACCOUNT
from moto.dynamodb import dynamodb_backends
from moto.dynamodb.exceptions import ConditionalCheckFailed
from moto.dynamodb.parsing.tokens import ExpressionTokenizer
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto import backends
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.sqs import models

cost = {"table_copies": 0, "queue_attributes": 0, "update_tokenizations": 0, "condition_lexes": 0, "module_listings": 0,
        "update_tree_deepcopies": 0, "static_update_checks": 0, "abstract_isinstance": 0, "method_listings": 0,
        "condition_parses": 0}
answers = {}


def counted(name, fn):
    def wrapper(*args, **kwargs):
        cost[name] += 1
        return fn(*args, **kwargs)
    return wrapper


attributes = models.Queue.attributes
models.Queue.attributes = property(counted("queue_attributes", attributes.fget))
ExpressionTokenizer.make_list = classmethod(counted("update_tokenizations", ExpressionTokenizer.make_list.__func__))
lex_one = ConditionExpressionParser._lex_one_node


def lex_one_node(self, remaining):
    if remaining == self.condition_expression:
        cost["condition_lexes"] += 1
    return lex_one(self, remaining)


ConditionExpressionParser._lex_one_node = lex_one_node
backends.list_of_moto_modules = counted("module_listings", backends.list_of_moto_modules)

# The update expression's validation: the copies of its tree made with
# copy.deepcopy, the runs of the checks that read only the tree, and the
# isinstance tests against the tree's abstract node classes.
import copy as _copy
from moto.dynamodb.parsing import validators
from moto.dynamodb.parsing.ast_nodes import Node

_deepcopy = _copy.deepcopy


def counting_tree_deepcopy(x, memo=None):
    if memo is None and isinstance(x, Node):
        cost["update_tree_deepcopies"] += 1
    return _deepcopy(x, memo)


validators.deepcopy = counting_tree_deepcopy
for checker in (validators.ActionCountValidator, validators.OverlappingPathsValidator, validators.UpdateHashRangeKeyValidator):
    checker.traverse = counted("static_update_checks", checker.traverse)
_abc_instancecheck = type(Node).__instancecheck__


def counting_instancecheck(cls, instance):
    cost["abstract_isinstance"] += 1
    return _abc_instancecheck(cls, instance)


type(Node).__instancecheck__ = counting_instancecheck

# SQS: a message past its retention period is not delivered, a fresh one is.
# The retention is SQS's longest, 14 days, and the expired message is made
# older than that: moto checks retention against the real clock, and with a
# short one (it was 60 s) the unpatched run, slow by design and slower on a
# busy machine, outlived it and saw early ballast expire (154 of 300).
RETENTION = 1_209_600
sqs = models.sqs_backends[ACCOUNT]["us-east-1"]
sqs.create_queue("speed", MessageRetentionPeriod=str(RETENTION))
for i in range(300):
    sqs.send_message("speed", "ballast-%d" % i)
expired = sqs.send_message("speed", "expired")
expired.sent_timestamp -= (RETENTION + 1) * 1000
cost["queue_attributes"] = 0
got = []
while True:
    batch = sqs.receive_message("speed", 10, 0, 3600)
    if not batch:
        break
    got += [m.body for m in batch]
answers["sqs_received"] = len(got)
answers["sqs_expired_delivered"] = "expired" in got

# DynamoDB: one expression text with other values each time, as the lock
# protocol sends it: the answers follow the values.
ddb = dynamodb_backends[ACCOUNT]["us-east-1"]
ddb.create_table(
    "speed",
    schema=[{"AttributeName": "k", "KeyType": "HASH"}],
    attr=[{"AttributeName": "k", "AttributeType": "S"}],
    throughput=None, indexes=None, global_indexes=None, streams=None,
    billing_mode="PAY_PER_REQUEST", sse_specification=None, tags=None,
    deletion_protection_enabled=False, warm_throughput=None,
)
outcomes = []
for old, new in [("-", "a"), ("a", "b"), ("a", "c")]:
    try:
        ddb.update_item(
            "speed", {"k": {"S": "key"}},
            update_expression="SET #v = :new, #n = if_not_exists(#n, :zero) + :one",
            expression_attribute_names={"#v": "v", "#n": "n"},
            expression_attribute_values={":new": {"S": new}, ":old": {"S": old}, ":zero": {"N": "0"}, ":one": {"N": "1"}},
            condition_expression="attribute_not_exists(#v) OR #v = :old",
        )
        outcomes.append("ok")
    except ConditionalCheckFailed:
        outcomes.append("refused")
item = ddb.get_item("speed", {"k": {"S": "key"}})
answers["ddb_outcomes"] = outcomes
# The parse and validation counts are this section's: one text, three values.
validation = {k: cost[k] for k in ("condition_lexes", "update_tokenizations", "update_tree_deepcopies", "static_update_checks", "abstract_isinstance")}

# Updates the checks refuse, twice each: a check that failed is not
# remembered as passed.
refusals = []
for _ in range(2):
    for expression, names in [("SET #k = :new", {"#k": "k"}), ("SET #v = :new, #v = :new", {"#v": "v"}), ("SET #v = :new SET #n = :new", {"#v": "v", "#n": "n"})]:
        try:
            ddb.update_item(
                "speed", {"k": {"S": "key"}}, update_expression=expression,
                expression_attribute_names=names, expression_attribute_values={":new": {"S": "z"}},
            )
            refusals.append("ok")
        except Exception as exc:
            refusals.append(type(exc).__name__)
answers["ddb_refusals"] = refusals
answers["ddb_item"] = {"v": item.attrs["v"].value, "n": item.attrs["n"].value}

# DynamoDB transactions: one that commits, one whose last write's condition
# fails, so that the writes before it are rolled back. The answers are the
# items after each; the cost the copies of a whole table made for them.
import copy
from moto.dynamodb.exceptions import TransactionCanceledException
from moto.dynamodb.models.table import Table

deepcopy = copy.deepcopy


def counting_deepcopy(x, memo=None):
    if isinstance(x, Table):
        cost["table_copies"] += 1
    return deepcopy(x, memo)


cost["table_copies"] = 0
copy.deepcopy = counting_deepcopy
for i in range(50):
    ddb.put_item("speed", {"k": {"S": "ballast-%d" % i}})


def transact(new, value, old):
    try:
        ddb.transact_write_items([
            {"Put": {"TableName": "speed", "Item": {"k": {"S": new}}}},
            {"Update": {"TableName": "speed", "Key": {"k": {"S": "key"}}, "UpdateExpression": "SET #v = :v",
                        "ExpressionAttributeNames": {"#v": "v"}, "ExpressionAttributeValues": {":v": {"S": value}}}},
            {"ConditionCheck": {"TableName": "speed", "Key": {"k": {"S": "ballast-0"}}, "ConditionExpression": "attribute_not_exists(#k) OR #k = :k",
                                "ExpressionAttributeNames": {"#k": "k"}, "ExpressionAttributeValues": {":k": {"S": old}}}},
        ])
        return "ok"
    except TransactionCanceledException:
        return "canceled"


def state():
    return {k: (None if ddb.get_item("speed", {"k": {"S": k}}) is None else ddb.get_item("speed", {"k": {"S": k}}).to_json()["Attributes"])
            for k in ["key", "tx-1", "tx-2", "ballast-0"]}


answers["tx_committed"] = transact("tx-1", "committed", "ballast-0")
answers["tx_after_commit"] = state()
answers["tx_rolled_back"] = transact("tx-2", "rolled back", "not-this")
answers["tx_after_rollback"] = state()
copy.deepcopy = deepcopy
# The lexing, parse and validation counts are the first update section's:
# the refused updates' and the transactions' own texts are left out.
cost.update(validation)
type(Node).__instancecheck__ = _abc_instancecheck

# A request's condition, parsed by its handler and again by the backend:
# the same text, names and values, the same names and values found.
from moto.dynamodb.comparisons import create_condition_expression_parser

ConditionExpressionParser._parse_paths = counted("condition_parses", ConditionExpressionParser._parse_paths)
found = []
for _ in range(2):
    parser = create_condition_expression_parser(
        "attribute_not_exists(#v) OR #v = :old", {"#v": "v"}, {":old": {"S": "parsed twice"}},
    )
    parser.parse()
    found.append([parser.expr_attr_names_found, parser.expr_attr_values_found])
answers["condition_found"] = found

# Each request checks that its action is a method of the service's handler.
import inspect
from moto.core import responses
from moto.dynamodb.responses import DynamoHandler

getmembers = inspect.getmembers
inspect.getmembers = counted("method_listings", getmembers)
answers["update_item_is_an_action"] = all("update_item" in responses.method_names_from_class(DynamoHandler) for _ in range(3))
inspect.getmembers = getmembers

# The dispatcher: the same backend for each host, however often asked.
app = DomainDispatcherApplication(create_app=None)
answers["backends"] = [app.get_backend_for_host(h) for h in ["dynamodb", "sqs.us-east-1.amazonaws.com", "dynamodb", "sqs.us-east-1.amazonaws.com"]]

print(json.dumps({"answers": answers, "cost": cost}, sort_keys=True))
