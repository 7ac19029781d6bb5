"""Every size limit of the product, once.

Interfaces derive their input schemas from these; the engine and the loader
enforce them. Changing one is a behaviour change (see the CHANGELOG).
"""

from __future__ import annotations

# Values an agent sends.
MAX_LABEL_LENGTH = 64
MAX_SLOT_VALUE_LENGTH = 1000
MAX_VALUES_PER_CALL = 200
# A typed slot's number or integer holds at most this many digits: a binary float (and
# so a JavaScript client's number) keeps every one of them, so the JSON number recorded
# reads back as the decimal that was sent (ADR 0116).
MAX_DIGITS = 15
# A choice slot lists at most this many options: more is a list to look up, not to ask.
MAX_OPTIONS = 50

# Ids: flows, nodes, slots, labels and the keys of `values`.
MAX_ID_LENGTH = 64

# Flow YAML (files and drafts).
MAX_YAML_BYTES = 256 * 1024
MAX_YAML_DEPTH = 32
# Expanded node count (aliases counted every time they are used): a real flow
# stays far below it, a "billion laughs" document exceeds it after a few levels.
MAX_YAML_NODES = 20_000

# A lookup's endpoint (issue 45): the seconds a call may take in all unless its endpoint
# says otherwise, and the fewest and the most it may say (a run, and the person with it,
# waits for the call); the bytes of an answer read at most (a label and a few values:
# more is not an answer).
LOOKUP_TIMEOUT = 3.0
MIN_LOOKUP_TIMEOUT = 0.1
MAX_LOOKUP_TIMEOUT = 10.0
MAX_LOOKUP_ANSWER_BYTES = 64 * 1024
# Calls one step may make: each lookup a run passes in one call, and again for a lookup
# whose run another call moved meanwhile (no flow should come near it).
MAX_LOOKUPS_PER_STEP = 16

# Free text a caller stores with a run.
MAX_REF_LENGTH = 200
MAX_CLOSE_REASON_LENGTH = 500
# Why a person discarded a draft.
MAX_DECISION_REASON_LENGTH = 2000
# A person's note when answering a stalled run; it is recorded in the step.
MAX_RESOLVE_NOTE_LENGTH = 2000
# Why a run was erased: kept, with who and when, where its values were.
MAX_ERASE_REASON_LENGTH = 500

# How many steps one run may hold. Past it, answers and guide_back are refused (a loop
# of back and answer would otherwise grow a run for ever); guide_close still ends it.
MAX_RUN_STEPS = 500

# Caller-supplied text (a name, a value) quoted in an error or a directive is cut to
# this many characters, so a 1 MB name never comes back in a 1 MB error.
MAX_ECHO_LENGTH = 64
# An error's reason is cut to this many characters: with the other keys an error stays
# about 100 tokens.
MAX_REASON_LENGTH = 300

# How many candidates a not-found error offers (a restore's revisions too).
MAX_CANDIDATES = 5
# How many of the names that exist a "has no X" message lists at most.
MAX_LISTED = 10
# How many misnamed keys of `values` a `next` names (the rest are in `ignored`).
MAX_NAMED_KEYS = 3

# From this many failed calls with the same error in a row (in one conversation: on a
# run, else of one ref or connection), retrying is discouraged: the error says to hand
# over or change approach, beside how to fix the call.
FAILURES_BEFORE_GIVING_UP = 3
# The loop breakers behind it: so many failed calls in a row of one conversation
# whatever their errors, or of one key across all its conversations (no call of the key
# accepted in between: nothing it does works).
STREAK_FAILURES_BEFORE_GIVING_UP = 10
KEY_FAILURES_BEFORE_GIVING_UP = 30
# A conversation's streak idle this long (seconds) is forgotten when its key fails again.
STREAK_IDLE_SECONDS = 24 * 3600

# Lists for people (the run pages, the flow pages, the JSON API): a page of runs, and the
# text a run list is searched with (a run id, or its start, or a ref).
RUNS_PER_PAGE = 50
MAX_RUNS_PER_PAGE = 200
MAX_RUN_QUERY_LENGTH = 200
# How far back the flow pages count runs (days; the API's ``days`` goes up to
# MAX_USAGE_DAYS), and at most how many runs they read to do it.
USAGE_DAYS = 30
MAX_USAGE_DAYS = 366
USAGE_MAX_RUNS = 5000
# The most recent runs a flow page lists.
RECENT_RUNS = 20
# How many of the caller's recent runs a "run not found" looks through for candidates.
RECENT_RUNS_FOR_CANDIDATES = 200
# How many of the caller's recent drafts a "draft not found" looks through for candidates.
RECENT_DRAFTS_FOR_CANDIDATES = 200
# resources/list: flows per page (a cursor leads to the next), and the longest URI read.
RESOURCES_PER_PAGE = 100
MAX_URI_LENGTH = 200

# An HTTP request to /mcp: a draft may hold MAX_YAML_BYTES of YAML, and JSON escaping can
# grow it, so four times that (1 MiB).
MAX_REQUEST_BYTES = 4 * MAX_YAML_BYTES

# A slot's pattern: lint refuses longer ones (a slot's format never needs more), and RE2
# compiles one in at most this memory (its default is 8 MiB): counted repetitions that
# would need more (``(a{1000}){1000}``) fail to compile instead.
MAX_PATTERN_LENGTH = 1000
MAX_PATTERN_MEMORY = 1 << 20
# A check's condition (a CEL expression, ADR 0117), and how many conditions one check holds.
MAX_CONDITION_LENGTH = 500
MAX_CONDITIONS = 20
# A lookup's labels (``returns``): an endpoint answers one of them, and each is a route, so
# as many as a choice has options.
MAX_RETURNS = 50

# A word longer than this is compared with no name for "did you mean" (every name is at
# most MAX_ID_LENGTH characters).
MAX_COMPARED_LENGTH = 256

# Stored as given, cut to these lengths: a draft's title, who submitted it, and the client
# name a caller without a key is known by.
MAX_TITLE_LENGTH = 500
MAX_SUBMITTER_LENGTH = 200
MAX_CLIENT_NAME_LENGTH = 80

# What one process keeps in memory, at most: flows built from pinned versions, diagram
# layouts, the drafts list's test verdicts, agent keys looked up, failure streaks
# counted while the database could not take them, addresses' budgets of refused requests
# and the refusals summed per address and second before they are recorded; and CEL
# environments (one per set of a flow's key types) and the check conditions compiled in
# them (ADR 0117).
PINNED_FLOWS = 256
DIAGRAM_LAYOUTS = 128
CEL_ENVIRONMENTS = 256
CONDITIONS_COMPILED = 4096
DRAFT_TEST_VERDICTS = 512
KEYS_REMEMBERED = 10_000
LOCAL_STREAKS = 10_000
REFUSED_ADDRESSES = 10_000
REFUSAL_SUMMARIES = 10_000

# At most this many runs and audit records in one seal of the ledger (its window is cut
# shorter), so that sealing a busy minute stays one bounded transaction.
MAX_SEALED_RUNS = 5_000
MAX_SEALED_RECORDS = 10_000

# An OAuth access token's subject, stored as its runs' owner after "key:oauth:" (an
# owner is at most 200 characters); the metadata and keys an issuer may answer; the
# opaque tokens the issuer vouched for that one process remembers.
MAX_TOKEN_SUBJECT_LENGTH = 150
MAX_ISSUER_DOCUMENT_BYTES = 1024 * 1024
TOKENS_REMEMBERED = 10_000
