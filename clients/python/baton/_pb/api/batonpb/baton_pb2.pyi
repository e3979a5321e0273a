from baton._pb.google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

BLACKLISTED: Reason
DEADLOCK: Reason
DESCRIPTOR: _descriptor.FileDescriptor
HOLD_END_ABANDONED: HoldEnd
HOLD_END_CAS_RELEASED: HoldEnd
HOLD_END_HOLD_EXPIRED: HoldEnd
HOLD_END_RELEASED: HoldEnd
HOLD_END_REVOKED: HoldEnd
HOLD_END_SESSION_CLOSED: HoldEnd
HOLD_END_SESSION_EXPIRED: HoldEnd
HOLD_END_UNSPECIFIED: HoldEnd
HOLD_LOST: Reason
INVALID_ARGUMENT: Reason
LIMIT_MISMATCH: Reason
LOCK_NOT_FOUND: Reason
NOT_HOLDER: Reason
NOT_LEADER: Reason
NOT_PERMITTED: Reason
NOT_WAITING: Reason
NO_CREDENTIALS: Reason
NO_SPACE: Reason
OUTCOME_UNKNOWN: Reason
OVERLOADED: Reason
REASON_UNSPECIFIED: Reason
SECRET_MISMATCH: Reason
SESSION_EXPIRED: Reason
SESSION_NOT_FOUND: Reason
STALE_SEQUENCE: Reason
TOKEN_MISMATCH: Reason
TOO_MANY_HOLDS: Reason
TOO_MANY_PENDING: Reason
TOO_MANY_SESSIONS: Reason
TOO_MANY_WAITERS: Reason
WAIT_CANCELLED: Reason
WAIT_TIMED_OUT: Reason

class AcquireManyRequest(_message.Message):
    __slots__ = ["all", "header", "hold_limit", "limit", "lock_delay", "modes", "names", "owner_key", "shared"]
    ALL_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    HOLD_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_FIELD_NUMBER: _ClassVar[int]
    MODES_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    all: bool
    header: RequestHeader
    hold_limit: _duration_pb2.Duration
    limit: int
    lock_delay: _duration_pb2.Duration
    modes: _containers.RepeatedCompositeFieldContainer[LockMode]
    names: _containers.RepeatedScalarFieldContainer[str]
    owner_key: str
    shared: bool
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., names: _Optional[_Iterable[str]] = ..., owner_key: _Optional[str] = ..., shared: bool = ..., limit: _Optional[int] = ..., all: bool = ..., hold_limit: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., lock_delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., modes: _Optional[_Iterable[_Union[LockMode, _Mapping]]] = ...) -> None: ...

class AcquireManyResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AcquireResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[AcquireResponse, _Mapping]]] = ...) -> None: ...

class AcquireRequest(_message.Message):
    __slots__ = ["header", "hold_limit", "limit", "lock_delay", "name", "owner_key", "shared", "value", "wait", "wait_timeout"]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    HOLD_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    hold_limit: _duration_pb2.Duration
    limit: int
    lock_delay: _duration_pb2.Duration
    name: str
    owner_key: str
    shared: bool
    value: str
    wait: bool
    wait_timeout: _duration_pb2.Duration
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., name: _Optional[str] = ..., owner_key: _Optional[str] = ..., wait: bool = ..., wait_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., shared: bool = ..., limit: _Optional[int] = ..., hold_limit: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., lock_delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., value: _Optional[str] = ...) -> None: ...

class AcquireResponse(_message.Message):
    __slots__ = ["acquired", "count", "delayed_until", "holder", "lock_delay", "name", "position", "queued", "seq", "signed_token", "skipped", "token"]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DELAYED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SIGNED_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    acquired: bool
    count: int
    delayed_until: _timestamp_pb2.Timestamp
    holder: Holder
    lock_delay: _duration_pb2.Duration
    name: str
    position: int
    queued: bool
    seq: int
    signed_token: str
    skipped: bool
    token: int
    def __init__(self, name: _Optional[str] = ..., acquired: bool = ..., token: _Optional[int] = ..., count: _Optional[int] = ..., holder: _Optional[_Union[Holder, _Mapping]] = ..., queued: bool = ..., position: _Optional[int] = ..., seq: _Optional[int] = ..., skipped: bool = ..., lock_delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., delayed_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., signed_token: _Optional[str] = ...) -> None: ...

class AddMemberRequest(_message.Message):
    __slots__ = ["learner", "name", "peer_addr"]
    LEARNER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDR_FIELD_NUMBER: _ClassVar[int]
    learner: bool
    name: str
    peer_addr: str
    def __init__(self, name: _Optional[str] = ..., peer_addr: _Optional[str] = ..., learner: bool = ...) -> None: ...

class AddMemberResponse(_message.Message):
    __slots__ = ["initial_cluster", "members"]
    INITIAL_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    initial_cluster: str
    members: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., initial_cluster: _Optional[str] = ...) -> None: ...

class AuditEntry(_message.Message):
    __slots__ = ["action", "index", "principal", "time"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    action: str
    index: int
    principal: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, index: _Optional[int] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., principal: _Optional[str] = ..., action: _Optional[str] = ...) -> None: ...

class AuditRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class AuditResponse(_message.Message):
    __slots__ = ["entries"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AuditEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[AuditEntry, _Mapping]]] = ...) -> None: ...

class AuthPermission(_message.Message):
    __slots__ = ["perms", "prefix"]
    PERMS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    perms: str
    prefix: str
    def __init__(self, prefix: _Optional[str] = ..., perms: _Optional[str] = ...) -> None: ...

class AuthRole(_message.Message):
    __slots__ = ["name", "permissions"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    permissions: _containers.RepeatedCompositeFieldContainer[AuthPermission]
    def __init__(self, name: _Optional[str] = ..., permissions: _Optional[_Iterable[_Union[AuthPermission, _Mapping]]] = ...) -> None: ...

class AuthUser(_message.Message):
    __slots__ = ["has_token", "name", "roles"]
    HAS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    has_token: bool
    name: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., has_token: bool = ...) -> None: ...

class BlacklistRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    def __init__(self, session_id: _Optional[int] = ...) -> None: ...

class BlacklistResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ["acquire_seq", "header", "name"]
    ACQUIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    acquire_seq: int
    header: RequestHeader
    name: str
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., name: _Optional[str] = ..., acquire_seq: _Optional[int] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ["granted"]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    granted: AcquireResponse
    def __init__(self, granted: _Optional[_Union[AcquireResponse, _Mapping]] = ...) -> None: ...

class CasReleaseRequest(_message.Message):
    __slots__ = ["name", "session_id", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    session_id: int
    token: int
    def __init__(self, name: _Optional[str] = ..., session_id: _Optional[int] = ..., token: _Optional[int] = ...) -> None: ...

class CasReleaseResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ChangeAuthRequest(_message.Message):
    __slots__ = ["kind", "perms", "prefix", "role", "user", "with_token"]
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    ADD_ROLE: ChangeAuthRequest.Kind
    ADD_USER: ChangeAuthRequest.Kind
    DELETE_ROLE: ChangeAuthRequest.Kind
    DELETE_USER: ChangeAuthRequest.Kind
    DISABLE: ChangeAuthRequest.Kind
    ENABLE: ChangeAuthRequest.Kind
    GRANT: ChangeAuthRequest.Kind
    GRANT_ROLE: ChangeAuthRequest.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    KIND_UNSPECIFIED: ChangeAuthRequest.Kind
    PERMS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    REVOKE: ChangeAuthRequest.Kind
    REVOKE_ROLE: ChangeAuthRequest.Kind
    ROLE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    WITH_TOKEN_FIELD_NUMBER: _ClassVar[int]
    kind: ChangeAuthRequest.Kind
    perms: str
    prefix: str
    role: str
    user: str
    with_token: bool
    def __init__(self, kind: _Optional[_Union[ChangeAuthRequest.Kind, str]] = ..., user: _Optional[str] = ..., role: _Optional[str] = ..., prefix: _Optional[str] = ..., perms: _Optional[str] = ..., with_token: bool = ...) -> None: ...

class ChangeAuthResponse(_message.Message):
    __slots__ = ["token"]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class ChannelEnd(_message.Message):
    __slots__ = ["error"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: Error
    def __init__(self, error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class ChannelRequest(_message.Message):
    __slots__ = ["channel", "detach", "request"]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    DETACH_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    channel: int
    detach: bool
    request: SessionRequest
    def __init__(self, channel: _Optional[int] = ..., request: _Optional[_Union[SessionRequest, _Mapping]] = ..., detach: bool = ...) -> None: ...

class ChannelResponse(_message.Message):
    __slots__ = ["channel", "end", "response"]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    channel: int
    end: ChannelEnd
    response: SessionResponse
    def __init__(self, channel: _Optional[int] = ..., response: _Optional[_Union[SessionResponse, _Mapping]] = ..., end: _Optional[_Union[ChannelEnd, _Mapping]] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ["name", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: int
    def __init__(self, name: _Optional[str] = ..., token: _Optional[int] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ["held", "holder"]
    HELD_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    held: bool
    holder: Holder
    def __init__(self, held: bool = ..., holder: _Optional[_Union[Holder, _Mapping]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ["secret", "seq", "session_id"]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    secret: str
    seq: int
    session_id: int
    def __init__(self, session_id: _Optional[int] = ..., seq: _Optional[int] = ..., secret: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DeadlockCycle(_message.Message):
    __slots__ = ["edges"]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    edges: _containers.RepeatedCompositeFieldContainer[DeadlockEdge]
    def __init__(self, edges: _Optional[_Iterable[_Union[DeadlockEdge, _Mapping]]] = ...) -> None: ...

class DeadlockEdge(_message.Message):
    __slots__ = ["blocker_owner_key", "blocker_session_id", "lock", "owner_key", "queued_ahead", "session_id"]
    BLOCKER_OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    BLOCKER_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LOCK_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    QUEUED_AHEAD_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    blocker_owner_key: str
    blocker_session_id: int
    lock: str
    owner_key: str
    queued_ahead: bool
    session_id: int
    def __init__(self, session_id: _Optional[int] = ..., owner_key: _Optional[str] = ..., lock: _Optional[str] = ..., queued_ahead: bool = ..., blocker_session_id: _Optional[int] = ..., blocker_owner_key: _Optional[str] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ["code", "deadlock_cycle", "leader_addr", "message", "reason"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DEADLOCK_CYCLE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: int
    deadlock_cycle: _containers.RepeatedCompositeFieldContainer[DeadlockEdge]
    leader_addr: str
    message: str
    reason: Reason
    def __init__(self, code: _Optional[int] = ..., reason: _Optional[_Union[Reason, str]] = ..., message: _Optional[str] = ..., leader_addr: _Optional[str] = ..., deadlock_cycle: _Optional[_Iterable[_Union[DeadlockEdge, _Mapping]]] = ...) -> None: ...

class GetAuthRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetAuthResponse(_message.Message):
    __slots__ = ["enabled", "roles", "users", "you"]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    YOU_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    roles: _containers.RepeatedCompositeFieldContainer[AuthRole]
    users: _containers.RepeatedCompositeFieldContainer[AuthUser]
    you: str
    def __init__(self, enabled: bool = ..., users: _Optional[_Iterable[_Union[AuthUser, _Mapping]]] = ..., roles: _Optional[_Iterable[_Union[AuthRole, _Mapping]]] = ..., you: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ["history", "lock"]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    LOCK_FIELD_NUMBER: _ClassVar[int]
    history: _containers.RepeatedCompositeFieldContainer[PastHold]
    lock: Lock
    def __init__(self, lock: _Optional[_Union[Lock, _Mapping]] = ..., history: _Optional[_Iterable[_Union[PastHold, _Mapping]]] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ["name", "seq", "signed_token", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SIGNED_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    seq: int
    signed_token: str
    token: int
    def __init__(self, seq: _Optional[int] = ..., name: _Optional[str] = ..., token: _Optional[int] = ..., signed_token: _Optional[str] = ...) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class HistoryResponse(_message.Message):
    __slots__ = ["applied_index", "holds", "replicated"]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    holds: _containers.RepeatedCompositeFieldContainer[PastHold]
    replicated: bool
    def __init__(self, holds: _Optional[_Iterable[_Union[PastHold, _Mapping]]] = ..., applied_index: _Optional[int] = ..., replicated: bool = ...) -> None: ...

class HoldLost(_message.Message):
    __slots__ = ["name", "owner_key", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    owner_key: str
    token: int
    def __init__(self, name: _Optional[str] = ..., owner_key: _Optional[str] = ..., token: _Optional[int] = ...) -> None: ...

class Holder(_message.Message):
    __slots__ = ["count", "hold_limit", "lock_delay", "owner", "owner_key", "revoke_deadline", "revoke_grace", "session_id", "shared", "since", "token", "value"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    HOLD_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    REVOKE_DEADLINE_FIELD_NUMBER: _ClassVar[int]
    REVOKE_GRACE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    count: int
    hold_limit: _duration_pb2.Duration
    lock_delay: _duration_pb2.Duration
    owner: str
    owner_key: str
    revoke_deadline: _timestamp_pb2.Timestamp
    revoke_grace: _duration_pb2.Duration
    session_id: int
    shared: bool
    since: _timestamp_pb2.Timestamp
    token: int
    value: str
    def __init__(self, session_id: _Optional[int] = ..., owner: _Optional[str] = ..., owner_key: _Optional[str] = ..., token: _Optional[int] = ..., count: _Optional[int] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., shared: bool = ..., hold_limit: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., lock_delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., revoke_deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., revoke_grace: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., value: _Optional[str] = ...) -> None: ...

class KeepAliveRequest(_message.Message):
    __slots__ = ["secret", "session_id"]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    secret: str
    session_id: int
    def __init__(self, session_id: _Optional[int] = ..., secret: _Optional[str] = ...) -> None: ...

class KeepAliveResponse(_message.Message):
    __slots__ = ["session_id", "ttl"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    ttl: _duration_pb2.Duration
    def __init__(self, session_id: _Optional[int] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class KeysRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class KeysResponse(_message.Message):
    __slots__ = ["keys"]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[SigningKey]
    def __init__(self, keys: _Optional[_Iterable[_Union[SigningKey, _Mapping]]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "prefix"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    prefix: str
    def __init__(self, prefix: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ["locks", "next_page_token"]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    locks: _containers.RepeatedCompositeFieldContainer[LockSummary]
    next_page_token: str
    def __init__(self, locks: _Optional[_Iterable[_Union[LockSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["after_id", "page_size"]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    after_id: int
    page_size: int
    def __init__(self, page_size: _Optional[int] = ..., after_id: _Optional[int] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_after_id", "sessions"]
    NEXT_AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_after_id: int
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_after_id: _Optional[int] = ...) -> None: ...

class Lock(_message.Message):
    __slots__ = ["delayed_until", "holders", "limit", "name", "waiters"]
    DELAYED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    delayed_until: _timestamp_pb2.Timestamp
    holders: _containers.RepeatedCompositeFieldContainer[Holder]
    limit: int
    name: str
    waiters: _containers.RepeatedCompositeFieldContainer[Waiter]
    def __init__(self, name: _Optional[str] = ..., holders: _Optional[_Iterable[_Union[Holder, _Mapping]]] = ..., waiters: _Optional[_Iterable[_Union[Waiter, _Mapping]]] = ..., limit: _Optional[int] = ..., delayed_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LockMode(_message.Message):
    __slots__ = ["limit", "shared"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    limit: int
    shared: bool
    def __init__(self, shared: bool = ..., limit: _Optional[int] = ...) -> None: ...

class LockSummary(_message.Message):
    __slots__ = ["delayed_until", "holder", "holders", "limit", "name", "waiters"]
    DELAYED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    delayed_until: _timestamp_pb2.Timestamp
    holder: Holder
    holders: int
    limit: int
    name: str
    waiters: int
    def __init__(self, name: _Optional[str] = ..., holder: _Optional[_Union[Holder, _Mapping]] = ..., waiters: _Optional[int] = ..., holders: _Optional[int] = ..., limit: _Optional[int] = ..., delayed_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ["client_addr", "id", "learner", "log_version", "name", "peer_addr"]
    CLIENT_ADDR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LEARNER_FIELD_NUMBER: _ClassVar[int]
    LOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDR_FIELD_NUMBER: _ClassVar[int]
    client_addr: str
    id: int
    learner: bool
    log_version: int
    name: str
    peer_addr: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[int] = ..., peer_addr: _Optional[str] = ..., client_addr: _Optional[str] = ..., learner: bool = ..., log_version: _Optional[int] = ...) -> None: ...

class OpenSessionRequest(_message.Message):
    __slots__ = ["nonce", "owner", "secret", "ttl"]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    owner: str
    secret: str
    ttl: _duration_pb2.Duration
    def __init__(self, ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., owner: _Optional[str] = ..., nonce: _Optional[int] = ..., secret: _Optional[str] = ...) -> None: ...

class OpenSessionResponse(_message.Message):
    __slots__ = ["secret", "session_id", "ttl"]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    secret: str
    session_id: int
    ttl: _duration_pb2.Duration
    def __init__(self, session_id: _Optional[int] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class PastHold(_message.Message):
    __slots__ = ["ended", "ended_index", "how", "owner", "owner_key", "session_id", "shared", "since", "token", "value"]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    ENDED_INDEX_FIELD_NUMBER: _ClassVar[int]
    HOW_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ended: _timestamp_pb2.Timestamp
    ended_index: int
    how: HoldEnd
    owner: str
    owner_key: str
    session_id: int
    shared: bool
    since: _timestamp_pb2.Timestamp
    token: int
    value: str
    def __init__(self, session_id: _Optional[int] = ..., owner: _Optional[str] = ..., owner_key: _Optional[str] = ..., token: _Optional[int] = ..., shared: bool = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ended: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ended_index: _Optional[int] = ..., how: _Optional[_Union[HoldEnd, str]] = ..., value: _Optional[str] = ...) -> None: ...

class ProclaimRequest(_message.Message):
    __slots__ = ["header", "name", "owner_key", "token", "value"]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    name: str
    owner_key: str
    token: int
    value: str
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., name: _Optional[str] = ..., token: _Optional[int] = ..., owner_key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class ProclaimResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class PromoteMemberRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class PromoteMemberResponse(_message.Message):
    __slots__ = ["members"]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ["header", "name", "owner_key", "token"]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    name: str
    owner_key: str
    token: int
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., name: _Optional[str] = ..., token: _Optional[int] = ..., owner_key: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ["remaining_count"]
    REMAINING_COUNT_FIELD_NUMBER: _ClassVar[int]
    remaining_count: int
    def __init__(self, remaining_count: _Optional[int] = ...) -> None: ...

class RemoveMemberRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RemoveMemberResponse(_message.Message):
    __slots__ = ["members"]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ...) -> None: ...

class RenewHoldRequest(_message.Message):
    __slots__ = ["name", "secret", "session_id", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    secret: str
    session_id: int
    token: int
    def __init__(self, session_id: _Optional[int] = ..., name: _Optional[str] = ..., token: _Optional[int] = ..., secret: _Optional[str] = ...) -> None: ...

class RenewHoldResponse(_message.Message):
    __slots__ = ["hold_limit"]
    HOLD_LIMIT_FIELD_NUMBER: _ClassVar[int]
    hold_limit: _duration_pb2.Duration
    def __init__(self, hold_limit: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RequestHeader(_message.Message):
    __slots__ = ["min_unacked_seq", "secret", "seq", "session_id"]
    MIN_UNACKED_SEQ_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    min_unacked_seq: int
    secret: str
    seq: int
    session_id: int
    def __init__(self, session_id: _Optional[int] = ..., seq: _Optional[int] = ..., min_unacked_seq: _Optional[int] = ..., secret: _Optional[str] = ...) -> None: ...

class ResumeSession(_message.Message):
    __slots__ = ["secret", "session_id"]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    secret: str
    session_id: int
    def __init__(self, session_id: _Optional[int] = ..., secret: _Optional[str] = ...) -> None: ...

class RevokeRequest(_message.Message):
    __slots__ = ["grace", "name", "token"]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    grace: _duration_pb2.Duration
    name: str
    token: int
    def __init__(self, name: _Optional[str] = ..., token: _Optional[int] = ..., grace: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RevokeRequested(_message.Message):
    __slots__ = ["deadline", "grace", "name", "owner_key", "token"]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    deadline: _timestamp_pb2.Timestamp
    grace: _duration_pb2.Duration
    name: str
    owner_key: str
    token: int
    def __init__(self, name: _Optional[str] = ..., owner_key: _Optional[str] = ..., token: _Optional[int] = ..., grace: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RevokeResponse(_message.Message):
    __slots__ = ["revoked"]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    revoked: _containers.RepeatedCompositeFieldContainer[Holder]
    def __init__(self, revoked: _Optional[_Iterable[_Union[Holder, _Mapping]]] = ...) -> None: ...

class RotateSigningKeyRequest(_message.Message):
    __slots__ = ["retention"]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    retention: _duration_pb2.Duration
    def __init__(self, retention: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RotateSigningKeyResponse(_message.Message):
    __slots__ = ["key_id", "keys"]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: int
    keys: _containers.RepeatedCompositeFieldContainer[SigningKey]
    def __init__(self, key_id: _Optional[int] = ..., keys: _Optional[_Iterable[_Union[SigningKey, _Mapping]]] = ...) -> None: ...

class SaveSnapshotRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SaveSnapshotResponse(_message.Message):
    __slots__ = ["data", "header"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    header: SnapshotHeader
    def __init__(self, header: _Optional[_Union[SnapshotHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["blacklisted", "created", "holds", "id", "owner", "ttl"]
    BLACKLISTED_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    blacklisted: bool
    created: _timestamp_pb2.Timestamp
    holds: int
    id: int
    owner: str
    ttl: _duration_pb2.Duration
    def __init__(self, id: _Optional[int] = ..., owner: _Optional[str] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., blacklisted: bool = ..., created: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., holds: _Optional[int] = ...) -> None: ...

class SessionHolds(_message.Message):
    __slots__ = ["done", "holds", "index", "revoking"]
    DONE_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    REVOKING_FIELD_NUMBER: _ClassVar[int]
    done: bool
    holds: _containers.RepeatedCompositeFieldContainer[HoldLost]
    index: int
    revoking: _containers.RepeatedCompositeFieldContainer[RevokeRequested]
    def __init__(self, holds: _Optional[_Iterable[_Union[HoldLost, _Mapping]]] = ..., index: _Optional[int] = ..., done: bool = ..., revoking: _Optional[_Iterable[_Union[RevokeRequested, _Mapping]]] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ["acquire", "acquire_many", "cancel", "close", "id", "keep_alive", "open", "proclaim", "release", "renew_hold", "resume"]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    ACQUIRE_MANY_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    PROCLAIM_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RENEW_HOLD_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    acquire: AcquireRequest
    acquire_many: AcquireManyRequest
    cancel: CancelRequest
    close: CloseSessionRequest
    id: int
    keep_alive: KeepAliveRequest
    open: OpenSessionRequest
    proclaim: ProclaimRequest
    release: ReleaseRequest
    renew_hold: RenewHoldRequest
    resume: ResumeSession
    def __init__(self, id: _Optional[int] = ..., open: _Optional[_Union[OpenSessionRequest, _Mapping]] = ..., resume: _Optional[_Union[ResumeSession, _Mapping]] = ..., keep_alive: _Optional[_Union[KeepAliveRequest, _Mapping]] = ..., acquire: _Optional[_Union[AcquireRequest, _Mapping]] = ..., release: _Optional[_Union[ReleaseRequest, _Mapping]] = ..., cancel: _Optional[_Union[CancelRequest, _Mapping]] = ..., acquire_many: _Optional[_Union[AcquireManyRequest, _Mapping]] = ..., close: _Optional[_Union[CloseSessionRequest, _Mapping]] = ..., renew_hold: _Optional[_Union[RenewHoldRequest, _Mapping]] = ..., proclaim: _Optional[_Union[ProclaimRequest, _Mapping]] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ["acquire", "acquire_many", "cancel", "close", "error", "grant", "hold_lost", "holds", "id", "keep_alive", "open", "proclaim", "release", "renew_hold", "revoke_requested", "session_lost", "wait_ended"]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    ACQUIRE_MANY_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    HOLD_LOST_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    PROCLAIM_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RENEW_HOLD_FIELD_NUMBER: _ClassVar[int]
    REVOKE_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    SESSION_LOST_FIELD_NUMBER: _ClassVar[int]
    WAIT_ENDED_FIELD_NUMBER: _ClassVar[int]
    acquire: AcquireResponse
    acquire_many: AcquireManyResponse
    cancel: CancelResponse
    close: CloseSessionResponse
    error: Error
    grant: Grant
    hold_lost: HoldLost
    holds: SessionHolds
    id: int
    keep_alive: KeepAliveResponse
    open: OpenSessionResponse
    proclaim: ProclaimResponse
    release: ReleaseResponse
    renew_hold: RenewHoldResponse
    revoke_requested: RevokeRequested
    session_lost: Error
    wait_ended: WaitEnded
    def __init__(self, id: _Optional[int] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., open: _Optional[_Union[OpenSessionResponse, _Mapping]] = ..., keep_alive: _Optional[_Union[KeepAliveResponse, _Mapping]] = ..., acquire: _Optional[_Union[AcquireResponse, _Mapping]] = ..., release: _Optional[_Union[ReleaseResponse, _Mapping]] = ..., cancel: _Optional[_Union[CancelResponse, _Mapping]] = ..., acquire_many: _Optional[_Union[AcquireManyResponse, _Mapping]] = ..., close: _Optional[_Union[CloseSessionResponse, _Mapping]] = ..., grant: _Optional[_Union[Grant, _Mapping]] = ..., wait_ended: _Optional[_Union[WaitEnded, _Mapping]] = ..., session_lost: _Optional[_Union[Error, _Mapping]] = ..., hold_lost: _Optional[_Union[HoldLost, _Mapping]] = ..., holds: _Optional[_Union[SessionHolds, _Mapping]] = ..., renew_hold: _Optional[_Union[RenewHoldResponse, _Mapping]] = ..., revoke_requested: _Optional[_Union[RevokeRequested, _Mapping]] = ..., proclaim: _Optional[_Union[ProclaimResponse, _Mapping]] = ...) -> None: ...

class SessionsRequest(_message.Message):
    __slots__ = ["requests"]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[ChannelRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[ChannelRequest, _Mapping]]] = ...) -> None: ...

class SessionsResponse(_message.Message):
    __slots__ = ["responses"]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[ChannelResponse]
    def __init__(self, responses: _Optional[_Iterable[_Union[ChannelResponse, _Mapping]]] = ...) -> None: ...

class SigningKey(_message.Message):
    __slots__ = ["created", "current", "id", "not_after_unix_nano", "public_key", "retired"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NOT_AFTER_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    created: _timestamp_pb2.Timestamp
    current: bool
    id: int
    not_after_unix_nano: int
    public_key: bytes
    retired: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., public_key: _Optional[bytes] = ..., created: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., current: bool = ..., retired: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., not_after_unix_nano: _Optional[int] = ...) -> None: ...

class SnapshotHeader(_message.Message):
    __slots__ = ["cluster_id", "data_sha256", "index", "log_version", "members", "size", "taken_at", "taken_by", "term"]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_SHA256_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TAKEN_AT_FIELD_NUMBER: _ClassVar[int]
    TAKEN_BY_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    cluster_id: int
    data_sha256: bytes
    index: int
    log_version: int
    members: _containers.RepeatedCompositeFieldContainer[Member]
    size: int
    taken_at: _timestamp_pb2.Timestamp
    taken_by: str
    term: int
    def __init__(self, cluster_id: _Optional[int] = ..., index: _Optional[int] = ..., term: _Optional[int] = ..., log_version: _Optional[int] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., size: _Optional[int] = ..., data_sha256: _Optional[bytes] = ..., taken_by: _Optional[str] = ..., taken_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ["applied_index", "cluster_id", "commit_index", "disk_free_bytes", "id", "leader", "leader_addr", "leader_id", "locks", "log_version", "low_disk", "members", "min_free_disk_bytes", "name", "role", "sessions", "term", "version"]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    DISK_FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    LOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    LOW_DISK_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    MIN_FREE_DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    cluster_id: int
    commit_index: int
    disk_free_bytes: int
    id: int
    leader: str
    leader_addr: str
    leader_id: int
    locks: int
    log_version: int
    low_disk: bool
    members: _containers.RepeatedCompositeFieldContainer[Member]
    min_free_disk_bytes: int
    name: str
    role: str
    sessions: int
    term: int
    version: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[int] = ..., leader: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_addr: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., role: _Optional[str] = ..., sessions: _Optional[int] = ..., locks: _Optional[int] = ..., version: _Optional[str] = ..., log_version: _Optional[int] = ..., disk_free_bytes: _Optional[int] = ..., min_free_disk_bytes: _Optional[int] = ..., low_disk: bool = ..., cluster_id: _Optional[int] = ...) -> None: ...

class TransferLeadershipRequest(_message.Message):
    __slots__ = ["to"]
    TO_FIELD_NUMBER: _ClassVar[int]
    to: str
    def __init__(self, to: _Optional[str] = ...) -> None: ...

class TransferLeadershipResponse(_message.Message):
    __slots__ = ["leader", "leader_addr"]
    LEADER_ADDR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    leader: str
    leader_addr: str
    def __init__(self, leader: _Optional[str] = ..., leader_addr: _Optional[str] = ...) -> None: ...

class WaitEnded(_message.Message):
    __slots__ = ["deadlock_cycle", "name", "reason", "seq"]
    DEADLOCK_CYCLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    deadlock_cycle: _containers.RepeatedCompositeFieldContainer[DeadlockEdge]
    name: str
    reason: Reason
    seq: int
    def __init__(self, seq: _Optional[int] = ..., name: _Optional[str] = ..., reason: _Optional[_Union[Reason, str]] = ..., deadlock_cycle: _Optional[_Iterable[_Union[DeadlockEdge, _Mapping]]] = ...) -> None: ...

class Waiter(_message.Message):
    __slots__ = ["owner", "owner_key", "session_id", "shared", "since", "wait_timeout"]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    OWNER_KEY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    owner: str
    owner_key: str
    session_id: int
    shared: bool
    since: _timestamp_pb2.Timestamp
    wait_timeout: _duration_pb2.Duration
    def __init__(self, session_id: _Optional[int] = ..., owner: _Optional[str] = ..., owner_key: _Optional[str] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., wait_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., shared: bool = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ["after_index", "name"]
    AFTER_INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    after_index: int
    name: str
    def __init__(self, name: _Optional[str] = ..., after_index: _Optional[int] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ["gap", "index", "lock", "missed", "missed_all"]
    GAP_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LOCK_FIELD_NUMBER: _ClassVar[int]
    MISSED_ALL_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    gap: bool
    index: int
    lock: Lock
    missed: _containers.RepeatedCompositeFieldContainer[PastHold]
    missed_all: bool
    def __init__(self, lock: _Optional[_Union[Lock, _Mapping]] = ..., index: _Optional[int] = ..., missed: _Optional[_Iterable[_Union[PastHold, _Mapping]]] = ..., gap: bool = ..., missed_all: bool = ...) -> None: ...

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class HoldEnd(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
