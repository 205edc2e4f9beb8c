/*
 * dedupe.pml: a Promela model of the idempotency lock protocol of
 * package sqsonce (lock.go, over the store; one key K, one DynamoDB
 * record), checked by spin.
 * README.md in this folder says what it models, what it checks and what it
 * leaves out; run.sh runs it (make model, make model-mutants).
 *
 * Time is an abstract global clock 0..MAXT. Every DynamoDB request is one
 * atomic step that evaluates its condition and applies its update, or fails;
 * its answer may be lost, and the client then re-sends the same request (same
 * owner token, same parameters, evaluated later), as the SDK's retries do.
 *
 * Properties are assert()s whose first operand names them: a hidden variable
 * that is always 0, so pan prints the property's name with the failed
 * expression. printf lines (MSC: ...) tell a counterexample's story when spin
 * replays a trail (spin -t); pan itself prints nothing of them.
 * (d), no deadlock, is pan's own check of invalid end states, with init's
 * final check that no message is left received by a consumer that is gone.
 *
 * -DTX: the transactional completion (store.Transactor, sqsonce/store/tx.go;
 * sqsonce/lock.go, hold.finish, hold.finishTx and locker.commit). The
 * function's effect is a write staged in its transaction (no I/O, nothing
 * applied), applied only by the commit, in one atomic step with the record's
 * COMPLETED update. Properties (e): each key's effect is committed exactly
 * once within its dedupe window. Without TX, the plain completion and its
 * properties (a) to (d) as they were.
 *
 * -DEMIT (with or without TX): exactly-once emits (emit.go; lock.go
 * hold.finish, hold.completed, hold.finishTx, locker.duplicate and
 * locker.relay; store.Store's MarkSent). Every work that returns nil has
 * staged one message (Emit), written with its completion (the Complete's
 * update; with TX, inside the commit) as the record's outbox; once the
 * completion is known written, the holder sends it, its id the completion's
 * fence (hash(record id, fence, position): one key, one position), then
 * MarkSent removes the outbox under the condition COMPLETED, owner and fence.
 * A later delivery that finds the completion with its outbox pending relays
 * it the same way before it answers "duplicate". The receiver drops repeats
 * by id. Properties emit_a to emit_d: README.md, "Emits".
 *
 * Fences: Acquire writes fence = if_not_exists(fence, <now in ms>) + 1. The
 * clock seed is abstracted as the highest fence ever issued for the key
 * (fmax): a record created afresh (never there, or deleted by TTL long after
 * its last lock) starts above every earlier fence, which the clock provides as
 * long as the hosts' clocks agree within the record's lifetime. README.md,
 * "Fences", says why that abstraction is sound.
 */

/* ---- bounds (override with spin -DNAME=value) ---- */
#ifndef MAXT
#define MAXT      3   /* the clock runs from 0 to MAXT */
#endif
#ifndef LOCK
#define LOCK      1   /* lock length: lockExpiresAt = now + LOCK */
#endif
#ifndef WINDOW
#ifdef TX
/* The transactional model checks exactly-once within the dedupe window: the
 * window outlasts the run, its last delivery (init) included. A delivery
 * after the window's end runs the work again by design (a new key). */
#define WINDOW    (MAXT + LOCK + 2)
#else
#define WINDOW    1   /* dedupe window: expiresAt = now + WINDOW */
#endif
#endif
#ifndef MAXDO
#define MAXDO     3   /* Guard.Do calls in all (each takes a fresh owner token) */
#endif
#ifndef MAXFAULT
#define MAXFAULT  1   /* lost answers, give-ups and crashes together */
#endif
#ifndef MAXLOST
#define MAXLOST   MAXFAULT  /* answers lost (the request was or was not applied), then re-sent */
#endif
#ifndef MAXGIVEUP
#define MAXGIVEUP MAXFAULT  /* requests the client gave up on (a store error) */
#endif
#ifndef MAXCRASH
#define MAXCRASH  MAXFAULT  /* consumer crashes */
#endif
#define FAULT_OK (nlost + ngive + ncrash < MAXFAULT)

#define NMSG  2       /* messages carrying K: an original and a duplicate send */
#define NCONS 2       /* consumers (Lambda invocations running concurrently) */

/* record status */
#define ABSENT 0
#define PROC   1      /* PROCESSING */
#define DONE   2      /* COMPLETED */
#define REL    3      /* RELEASED: the lock ended, the record (and its fence) kept */

/* message state in SQS */
#define VIS 0         /* visible (or invisible until its timeout: same thing here) */
#define INF 1         /* received by a consumer */
#define DEL 2         /* deleted */

/* answer of a conditional request */
#define R_NONE 0
#define R_OK   1
#define R_CCF  2      /* ConditionalCheckFailed, with the item (ALL_OLD) */
#define R_EFFECT 3    /* TX: a condition of the work's own writes failed (*store.EffectError) */

/* business outcome: the variable defaults to FAILURE; only an explicit
 * success sets SUCCESS */
#define FAILURE   0
#define SUCCESS   1
#define PERMANENT 2
#ifdef MUTANT_ZERO_OUTCOME_SUCCESS
#define DEFAULT_OUTCOME SUCCESS   /* bug: an odd exit counts as success */
#else
#define DEFAULT_OUTCOME FAILURE
#endif

/* downstream write: fs (the business function's view) */
#define FS_NONE     0
#define FS_INFLIGHT 1
#define FS_ACCEPTED 2
#define FS_REFUSED  3

/* ---- the protocol's conditions and updates, and the seeded bugs ---- */
#ifdef MUTANT_NO_FENCE_INCREMENT
#define FENCE_INCREMENT skip
#else
#define FENCE_INCREMENT fence = fence + 1      /* ADD fence 1 */
#endif

/* The fence of a record created afresh: if_not_exists(fence, <now in ms>).
 * The clock in ms, read by an acquirer after the deleted record's lifetime
 * (an hour past its last lock, or its dedupe window), is above every fence
 * issued before: fmax, the highest fence issued for the key so far.
 * MUTANT_FENCE_RESET_ON_DELETE: the old ADD fence 1 on a missing attribute,
 * which starts again from 1 after a delete.
 * MUTANT_RELEASE_DELETES: Release deletes the record (the old DeleteItem).
 * The record can then be created again at once: its life may be shorter than
 * the hosts' clocks disagree, and the clock seed is worth nothing. The model
 * takes the worst seed after a release's delete, 0 (the old restart at 1);
 * after TTL's, fmax as in the protocol. */
#ifdef MUTANT_FENCE_RESET_ON_DELETE
#define SEED 0
#else
#ifdef MUTANT_RELEASE_DELETES
#define SEED (relDeleted -> 0 : fmax)
#else
#define SEED fmax
#endif
#endif

/* Acquire's condition, for a request whose now is t: no record, a released
 * lock, an expired lock, or an ended window. */
#define ACQUIRE_COND(t) \
	(st == ABSENT || st == REL || (st == PROC && lockExp < (t)) || (st == DONE && expAt < (t)))

#ifdef MUTANT_UNCONDITIONAL_COMPLETE
#define COMPLETE_COND true
#else
#ifdef COMPLETE_REQUIRES_PROCESSING
#define COMPLETE_COND (owner == tok && st == PROC)
#else
#define COMPLETE_COND (owner == tok)
#endif
#endif

#ifdef MUTANT_UNCONDITIONAL_RELEASE
#define RELEASE_COND (st != ABSENT)   /* releases whatever record is there (an update
                                         without a condition on no record would create
                                         one RELEASED, without a fence: as absent here) */
#else
#ifdef MUTANT_RELEASE_OWNER_ONLY
#define RELEASE_COND (owner == tok)   /* releases its own record in any status */
#else
/* The store's release (sqsonce/store/dynamostore/store.go; the store contract, every store) also requires PROCESSING, so an
 * operator's release racing a completion cannot undo it; a repeat that finds
 * the record RELEASED by the same owner is a success, like a refusal here. */
#define RELEASE_COND (owner == tok && st == PROC)
#endif
#endif

#ifdef MUTANT_UNCONDITIONAL_RENEW
#define RENEW_COND true
#else
#define RENEW_COND (owner == tok && st == PROC)
#endif

/* The record's part of a transaction's commit (store.Tx.Commit; memstore
 * Tx.Commit, the DynamoDB and PostgreSQL stores the same): the lease's
 * PROCESSING lock, owner and fence.
 * MUTANT_TX_COMMIT_NO_OWNER: PROCESSING only, any holder's.
 * MUTANT_TX_COMMIT_UNCONDITIONAL: no condition at all. */
#ifdef MUTANT_TX_COMMIT_NO_OWNER
#define TX_COMMIT_COND (st == PROC)
#else
#ifdef MUTANT_TX_COMMIT_UNCONDITIONAL
#define TX_COMMIT_COND true
#else
#define TX_COMMIT_COND (owner == tok && fence == myFence && st == PROC)
#endif
#endif

#ifdef MUTANT_NO_OWN_CHECK
#define OWN_LOCK false                  /* bug: our own applied attempt reads as "in progress" */
#else
#define OWN_LOCK (oSt == PROC && oOwner == tok)
#endif

/* ---- property names (always 0: they only label the assertions) ---- */
hidden byte a_live_lock_exclusive;
hidden byte b_no_loss;
hidden byte b_completed_only_after_success;
hidden byte c_write_only_by_owner;
hidden byte c_stale_write_refused;
hidden byte c_current_write_accepted;
hidden byte d_no_message_left_received;
#ifdef TX
hidden byte e_effect_at_most_once;
hidden byte e_effect_at_least_once;
#endif
#ifdef EMIT
hidden byte emit_a_outbox_iff_completion;
hidden byte emit_b_marked_only_after_sent;
hidden byte emit_c_received_at_most_once;
hidden byte emit_c_received_exactly_once;
hidden byte emit_d_sent_only_if_committed;
#endif

/* ---- global state ---- */
byte now;                 /* the clock */

/* the DynamoDB record of K */
byte st;                  /* ABSENT, PROC, DONE, REL */
byte owner;               /* owner token, 0 = none (kept by a release) */
byte fence;               /* 0 while absent: the attribute is gone with the item */
byte lockExp;             /* lockExpiresAt */
byte expAt;               /* expiresAt of a COMPLETED record: end of the dedupe window
                             (a lock's, an hour past lockExpiresAt, is abstracted: see TTL) */
byte recSeq;              /* ghost: which acquisition (1, 2, ...) wrote the lock */
byte fmax;                /* the clock seed: the highest fence issued for K so far */
bit  held[NCONS];         /* ghost: consumer c is inside a Do whose acquisition was
                             applied to this record since it was last created */
#ifdef MUTANT_RELEASE_DELETES
bit  relDeleted;          /* the record was last deleted by a release */
#endif

/* SQS */
byte msg[NMSG];           /* VIS, INF, DEL */
bit  fwd[NMSG];           /* accepted by the operator queue */

/* downstream store with fencing, and one write in flight per consumer */
byte dsMax;               /* highest fence accepted */
byte dsSeq;               /* ghost: acquisition of the last accepted write */
bit  pend[NCONS];
byte pendF[NCONS];
byte pendS[NCONS];        /* ghost: acquisition of the write in flight */
byte pendR[NCONS];        /* 0 none, 1 accepted, 2 refused */

bit  workDone;            /* ghost: some business run returned success */
bit  drop;                /* IN_PROGRESS policy: 0 retry, 1 drop */
byte ntok;                /* owner tokens handed out = Do calls */
byte nseq;                /* ghost: acquisitions applied */
byte nlost, ngive, ncrash;
byte nfinished;
#ifdef TX
byte eff;                 /* K's effect: the committed increments of the work's write */
bit  dropped[NMSG];       /* ghost: deleted by IN_PROGRESS=drop */

/* The effect is applied: (e) never twice. */
#define APPLY_EFFECT \
	eff++; printf("MSC: K's effect applied: %d in all\n", eff); \
	assert(e_effect_at_most_once || eff <= 1)
#endif

#ifdef EMIT
/* ---- emits (emit.go): the outbox, the destination, the receiver ----
 * A work is named by its owner token w (1..MAXDO; LASTW is init's last
 * delivery's): the message it stages is "w's message". */
#define NW    (MAXDO + 2)
#define LASTW (MAXDO + 1)

byte ob;                  /* the record's outbox (Record.Outbox): 0 none, else w, the
                             work whose message it holds. Written only with the
                             completion, removed by MarkSent, by a takeover (Acquire
                             REMOVEs it) and with the record (TTL) */
bit  committed[NW];       /* ghost: w's message was written with w's completion */
bit  sent[NW];            /* ghost: the destination accepted a send of w's message */
bit  winLost[NW];         /* ghost: w's outbox went, still pending, with its completion
                             after its window ended (a takeover, or TTL) */
byte recvd[NW];           /* the receiver: how often it handled w's message (a new id) */
int  seen;                /* the receiver's ids so far (a bitmask): it drops a repeat */

/* The id of a message: emitID(record id, completion fence, position); one
 * record and one position here, so the completion's fence f. s is the Do
 * call that sends it.
 * MUTANT_EMIT_ID_CHANGES: derived from the sender (its owner token), so
 * two sends of one message carry two ids. */
#ifdef MUTANT_EMIT_ID_CHANGES
#define EMIT_ID(f, s) (16 + (s))
#else
#define EMIT_ID(f, s) (f)
#endif

/* One send of w's message with id i (Sender.Send), accepted by the
 * destination: emit_d, w's message was committed; the receiver, which
 * drops repeats by id, handles it at most once (emit_c). The destination's
 * queue and the receiver's own deliveries are folded into this step: the
 * receiver's dedupe by id makes their order and their repeats irrelevant. */
#define EMIT_SEND(w, i) \
	assert(emit_d_sent_only_if_committed || committed[w]); \
	sent[w] = 1; \
	if \
	:: seen & (1 << (i)) -> \
		printf("MSC: the receiver drops o%d's message, id %d: a repeat\n", w, i) \
	:: else -> \
		seen = seen | (1 << (i)); recvd[w]++; \
		printf("MSC: the receiver handles o%d's message, id %d (%d times)\n", w, i, recvd[w]); \
		assert(emit_c_received_at_most_once || recvd[w] <= 1) \
	fi

/* MarkSent's update (REMOVE outbox): emit_b, never before the message was
 * sent. */
#define EMIT_MARK \
	if \
	:: ob != 0 -> \
		printf("MSC: o%d's outbox marked sent (removed)\n", ob); \
		assert(emit_b_marked_only_after_sent || sent[ob]); \
		ob = 0 \
	:: else \
	fi

/* A pending outbox goes with its completion, after the completion's window
 * (a takeover's Acquire removes it; TTL deletes the record). */
#define EMIT_GONE \
	if \
	:: ob != 0 -> winLost[ob] = 1; \
		printf("MSC: o%d's messages, pending, go with its completion: its window ended\n", ob); \
		ob = 0 \
	:: else \
	fi

/* The completion (Complete's update; TX: the commit) writes the work's
 * message, if it staged one, in the same write: the outbox is the holder's.
 * A work that staged none sets no outbox (DynamoDB's update SETs it only
 * when there is one: a lock has none, Acquire REMOVEs it). */
#define EMIT_COMMIT \
	if \
	:: stg -> ob = tok; committed[tok] = 1 \
	:: else \
	fi

/* MarkSent's condition: the record is still the completion the relay read
 * (COMPLETED, owner and fence; the owner is relW, the outbox's work: emit_a
 * keeps them equal). A record that is gone is a success; the condition
 * failing otherwise is ErrRecordChanged, nothing written.
 * MUTANT_EMIT_MARK_UNCONDITIONAL: no condition, whatever outbox is there is
 * removed. */
#ifdef MUTANT_EMIT_MARK_UNCONDITIONAL
#define MARK_COND true
#else
#define MARK_COND (st == DONE && owner == relW && fence == relFence)
#endif

/* emit_a: an outbox only on a completion, and the completing work's own
 * (the owner's), committed with it. Checked in every state by the Outbox
 * monitor below. (Its other half, a completion carries its work's staged
 * message, holds by EMIT_COMMIT: committed[w] is set by that write only.) */
#define EMIT_INV \
	(ob == 0 || (st == DONE && owner == ob && committed[ob]))
#endif

/* Every step of a consumer that reads or writes shared state is one atomic
 * block; what happens in between is local. An answer that is lost leaves the
 * block with again = 1, so anything can happen (the clock too) before the
 * same request is sent again. */

/* The message is deleted: (b) no loss. */
#ifdef TX
/* (e) at least once: a message leaves SQS only once its key's effect is
 * committed, or the operator queue has it (a drop aside). */
#define DELETE_MSG \
	assert(b_no_loss || workDone || fwd[mi]); \
	assert(e_effect_at_least_once || eff > 0 || fwd[mi]); \
	msg[mi] = DEL; printf("MSC: m%d deleted\n", mi)
#else
#define DELETE_MSG \
	assert(b_no_loss || workDone || fwd[mi]); msg[mi] = DEL; printf("MSC: m%d deleted\n", mi)
#endif

#define RECEIVED \
	printf("MSC: c%d receives m%d at t=%d: Do with owner token o%d\n", me, mi, now, tok)

#define RESET_LOCALS \
	mi = 0; tok = 0; reqNow = 0; myFence = 0; mySeq = 0; myExp = 0; \
	r = R_NONE; oSt = 0; oOwner = 0; oFence = 0; oLockExp = 0; oSeq = 0; \
	res = FAILURE; fs = FS_NONE; lost = 0; again = 0; held[me] = 0 EMIT_RESET

#ifdef EMIT
#define EMIT_RESET ; relW = 0; relFence = 0; stg = 0
#else
#define EMIT_RESET
#endif

/* The message is left for redelivery (it reappears after its visibility
 * timeout), and the consumer takes the next one. */
#define REDELIVER \
	msg[mi] = VIS; printf("MSC: m%d visible again\n", mi); RESET_LOCALS; goto next

/* The consumer dies: its lock stays until it expires, its message reappears,
 * its write in flight (if any) may still arrive. Its Do has ended (held[me]
 * is cleared by RESET_LOCALS). */
#define CRASH \
	ncrash++; printf("MSC: c%d crashes at t=%d\n", me, now); REDELIVER

/* A completion whose outcome is unknown (plain: Complete's answer lost and
 * given up on, or failed): processed-unrecorded, the message deleted, as
 * ever without EMIT. With EMIT, the holder does not send (the completion
 * may not be written) and leaves the message for the next delivery, which
 * finds out: the completion with its outbox (relayed), or the lock, left to
 * expire, taken over. MUTANT_EMIT_UNRECORDED_DELETES: deleted, as without
 * EMIT (what lock.go's processedUnrecorded does: see README.md). */
#if defined(EMIT) && !defined(MUTANT_EMIT_UNRECORDED_DELETES)
#define COMPLETE_UNKNOWN \
	if \
	:: stg -> REDELIVER \
	:: else -> DELETE_MSG; RESET_LOCALS; goto next \
	fi
#else
#define COMPLETE_UNKNOWN DELETE_MSG; RESET_LOCALS; goto next
#endif

#ifdef EMIT
/* The messages are not all sent, or not marked (ErrEmitPending,
 * emitPending): the message is retried, and its redelivery relays them.
 * MUTANT_EMIT_DELETE_PENDING: the message is deleted, so nobody relays
 * them. */
#ifdef MUTANT_EMIT_DELETE_PENDING
#define EMIT_PENDING \
	printf("MSC: c%d emit pending: deletes m%d\n", me, mi); DELETE_MSG; RESET_LOCALS; goto next
#else
#define EMIT_PENDING \
	printf("MSC: c%d emit pending: m%d retried\n", me, mi); REDELIVER
#endif

/* The holder's completion is known written (hold.completed): it relays
 * its own message, the record as its lease says (owner, fence).
 * MUTANT_EMIT_SEND_BEFORE_COMMIT: it has sent it already, before the
 * completion: only MarkSent is left. */
#ifdef MUTANT_EMIT_SEND_BEFORE_COMMIT
#define HOLDER_RELAY relW = tok; relFence = myFence; goto mark
#else
#define HOLDER_RELAY relW = tok; relFence = myFence; goto relay
#endif
#endif

/* TX: a commit whose outcome is unknown (lock.go hold.finishTx, the default
 * case: uncommitted): the lock is left to expire, the message retried, and
 * the record settles it for the next delivery.
 * MUTANT_TX_RELEASE_UNKNOWN: the lock is released (caught only together with
 * MUTANT_RELEASE_OWNER_ONLY: see README.md).
 * MUTANT_TX_UNKNOWN_PROCESSED: reported processed, as the plain completion's
 * processed-unrecorded: the message deleted. */
#ifdef MUTANT_TX_RELEASE_UNKNOWN
#define TX_UNKNOWN res = FAILURE; goto release
#else
#ifdef MUTANT_TX_UNKNOWN_PROCESSED
#define TX_UNKNOWN DELETE_MSG; RESET_LOCALS; goto next
#else
#define TX_UNKNOWN REDELIVER
#endif
#endif

proctype Consumer(byte me)
{
	byte mi;                        /* the message being handled */
	byte tok;                       /* owner token of this Do */
	byte reqNow;                    /* "now" of the request being sent */
	byte myFence, mySeq, myExp;     /* the lease (mySeq: ghost) */
	byte r, oSt, oOwner, oFence, oLockExp, oSeq;  /* answer, and ALL_OLD */
	byte res;                       /* the business function's outcome */
	byte fs;                        /* its downstream write */
	bit  lost;                      /* a renewal found the lock lost */
	bit  again;                     /* the last answer was lost: re-send */
#ifdef EMIT
	byte relW, relFence;            /* the completion being relayed: its outbox's work
	                                   (= its owner), its fence (ALL_OLD's, or the lease's) */
	bit  stg;                       /* the work staged its message (Emit) */
#endif

next:
	if
	:: atomic { (msg[0] == DEL && msg[1] == DEL) || ntok >= MAXDO ->
		nfinished++; goto stop }
	:: atomic { ntok < MAXDO && msg[0] == VIS ->
		msg[0] = INF; mi = 0; ntok++; tok = ntok; reqNow = now; RECEIVED }
	:: atomic { ntok < MAXDO && msg[1] == VIS ->
		msg[1] = INF; mi = 1; ntok++; tok = ntok; reqNow = now; RECEIVED }
	fi;

	/* ---- Acquire: one conditional UpdateItem, parameters fixed at reqNow:
	 * absent, RELEASED, an expired lock or an ended window; fence =
	 * if_not_exists(fence, seed) + 1 ---- */
	do
	:: atomic {
		again = 0;
		if
		:: ACQUIRE_COND(reqNow) ->
			if
			:: st == ABSENT -> fence = SEED;  /* if_not_exists: the clock seed */
				printf("MSC: the record is created: fence seeded at %d\n", fence)
			:: else
			fi;
			oFence = fence;               /* the fence before the update (ALL_OLD's, or the seed) */
			FENCE_INCREMENT;
			if
			:: oFence + 1 > fmax -> fmax = oFence + 1
			:: else
			fi;
#if defined(EMIT) && !defined(MUTANT_EMIT_TAKEOVER_KEEPS_OUTBOX)
			EMIT_GONE;                    /* REMOVE #result, #outbox */
#endif
			st = PROC; owner = tok; lockExp = reqNow + LOCK; expAt = 0;
			nseq++; recSeq = nseq; oSeq = nseq; held[me] = 1;
			r = R_OK
		:: else ->
			oSt = st; oOwner = owner; oFence = fence; oLockExp = lockExp; oSeq = recSeq;
#ifdef EMIT
			relW = ob;                    /* ALL_OLD's outbox (0 but on a completion) */
#endif
			r = R_CCF
		fi;
		if
		:: nlost < MAXLOST && FAULT_OK -> nlost++; again = 1;      /* answer lost: re-sent */
			printf("MSC: c%d acquire (o%d) at t=%d answered %d (1 applied, 2 refused) but the answer is lost: re-sent\n", me, tok, now, r)
		:: ngive < MAXGIVEUP && FAULT_OK -> ngive++;               /* answer lost, SDK gave up: NotAcquired */
			printf("MSC: c%d acquire (o%d) answered %d (1 applied, 2 refused), answer lost, gave up: not acquired\n", me, tok, r);
			goto giveup
		:: ncrash < MAXCRASH && FAULT_OK ->
			printf("MSC: c%d acquire (o%d) answered %d (1 applied, 2 refused), then\n", me, tok, r);
			CRASH
		:: true ->
			if
			:: r == R_OK ->                        /* acquired: fence = old + 1 */
				myFence = oFence + 1; mySeq = oSeq; myExp = reqNow + LOCK;
				printf("MSC: c%d acquires (o%d) at t=%d: fence %d, lock until %d\n", me, tok, now, myFence, myExp)
			:: r == R_CCF && OWN_LOCK ->           /* our own earlier attempt: acquired */
				myFence = oFence; mySeq = oSeq; myExp = oLockExp;
				printf("MSC: c%d acquire refused by its own lock o%d: acquired, fence %d, lock until %d\n", me, tok, myFence, myExp)
			:: r == R_CCF && oSt == DONE ->        /* Duplicate: deleted */
#ifdef EMIT
				/* locker.duplicate: a completion with its outbox pending is
				 * relayed first, as the record read says (owner, fence) */
				if
				:: relW != 0 -> relFence = oFence;
					printf("MSC: c%d duplicate (COMPLETED by o%d, fence %d), its message pending: relays it\n", me, oOwner, oFence);
					goto relay
				:: else
				fi;
#endif
				printf("MSC: c%d duplicate (COMPLETED by o%d): deletes m%d\n", me, oOwner, mi);
				DELETE_MSG; RESET_LOCALS; goto next
			:: r == R_CCF && oSt == PROC && !(OWN_LOCK) ->   /* InProgress */
				if
				:: drop ->
					/* (b) with IN_PROGRESS=drop: the documented loss is that the
					 * other holder fails later; dropping on account of our own
					 * lock is a loss */
					printf("MSC: c%d in progress (o%d holds it): drops m%d\n", me, oOwner, mi);
					assert(b_no_loss || oOwner != tok);
#ifdef TX
					dropped[mi] = 1;
#endif
					msg[mi] = DEL; RESET_LOCALS; goto next
				:: else ->
					printf("MSC: c%d in progress (o%d holds it): m%d redelivered later\n", me, oOwner, mi);
					REDELIVER
				fi
			fi;
			r = R_NONE; oSt = 0; oOwner = 0; oFence = 0; oLockExp = 0; oSeq = 0; reqNow = 0;
			res = DEFAULT_OUTCOME;
			break
		fi }
	:: atomic { ngive < MAXGIVEUP && FAULT_OK -> ngive++;            /* failed unapplied, SDK gave up */
		printf("MSC: c%d acquire failed (store error): not acquired\n", me);
		goto giveup }
	od;
	goto work;

	/* ---- an acquire given up on (a store error) may have been applied:
	 * one owner-conditional Release (lock.go releaseGivenUp), the lease's
	 * fence unknown (the condition compares none), so that no lock of this
	 * Do's stays until it expires; refused (absent, or another owner's) it
	 * changes nothing. It may fail in turn: the lock then expires on its
	 * own. The message is redelivered either way. ---- */
giveup:
	atomic {
		if
		:: ngive < MAXGIVEUP && FAULT_OK -> ngive++;
			printf("MSC: c%d release after the give-up (o%d) failed: any lock of o%d expires on its own\n", me, tok, tok)
		:: RELEASE_COND ->
			st = REL; lockExp = 0; expAt = 0;
			printf("MSC: c%d releases o%d after the give-up at t=%d: RELEASED, fence %d kept\n", me, tok, now, fence)
		:: else ->
			printf("MSC: c%d release after the give-up (o%d) refused or a no-op: record owner o%d\n", me, tok, owner)
		fi;
		REDELIVER }

work:

	/* ---- the business function, and its renewals running beside it ---- */
	do
#ifdef TX
	/* TX: the function adds its write to its transaction (dynamostore.Add,
	 * pgstore.Tx; memstore Tx.Add), which applies nothing, then returns nil;
	 * or it fails. Staging touches no shared state, so it is not a step of
	 * its own. No guard on the lease: a paused holder returns at any later
	 * moment, its lock expired and taken over, its context cancelled. */
	:: atomic {
		if
#ifdef EMIT
		:: res = SUCCESS; workDone = 1; stg = 1;
			printf("MSC: c%d business function stages its write and its message, returns nil at t=%d\n", me, now);
#ifdef MUTANT_TX_EFFECT_OUTSIDE
			APPLY_EFFECT;
#endif
			skip
#endif
		:: res = SUCCESS; workDone = 1;
			printf("MSC: c%d business function stages its write and returns nil at t=%d\n", me, now);
#ifdef MUTANT_TX_EFFECT_OUTSIDE
			/* bug: the write is applied when fn returns, outside the
			 * transaction (before the commit) */
			APPLY_EFFECT;
#endif
			skip
		:: res = FAILURE;
			printf("MSC: c%d business function returns an error\n", me)
		:: res = PERMANENT;
			printf("MSC: c%d business function returns Permanent(err)\n", me)
		:: printf("MSC: c%d business function exits without returning: outcome %d (0 failure, 1 success)\n", me, res)
		fi;
		lost = 0; again = 0; reqNow = 0;     /* the renewal stops */
		break }
#else
	:: atomic { fs == FS_NONE && !lost && now <= myExp && !pend[me] ->
		/* (a): it runs its side effect only while no other holder's lock is live */
		assert(a_live_lock_exclusive || !(st == PROC && now <= lockExp && owner != tok));
		pend[me] = 1; pendF[me] = myFence; pendS[me] = mySeq; pendR[me] = 0;
		fs = FS_INFLIGHT;
		printf("MSC: c%d side effect: sends its write with fence %d at t=%d\n", me, myFence, now) }
	:: atomic { fs == FS_NONE || (fs == FS_INFLIGHT && pendR[me] != 0) ->   /* it ends */
		if
		:: fs == FS_INFLIGHT -> fs = pendR[me] + 1; pendR[me] = 0
		:: else
		fi;
		if
#ifdef EMIT
		:: fs == FS_ACCEPTED -> res = SUCCESS; workDone = 1; stg = 1;
			printf("MSC: c%d business function stages its message, returns nil\n", me)
#endif
		:: fs == FS_ACCEPTED -> res = SUCCESS; workDone = 1;
			printf("MSC: c%d business function returns nil\n", me)
		:: res = FAILURE;
			printf("MSC: c%d business function returns an error\n", me)
		:: res = PERMANENT;
			printf("MSC: c%d business function returns Permanent(err)\n", me)
		:: printf("MSC: c%d business function exits without returning: outcome %d (0 failure, 1 success)\n", me, res)
		fi;
		fs = FS_NONE; lost = 0; again = 0; reqNow = 0;     /* the renewal stops */
		break }
#endif
	/* Renew: UpdateItem if owner == o and PROCESSING, lockExpiresAt = now + LOCK
	 * (only when that extends the lock: otherwise it changes nothing) */
	:: atomic { !lost && (again || now + LOCK > myExp) ->
		if
		:: !again -> reqNow = now
		:: else
		fi;
		again = 0;
		if
		:: RENEW_COND ->
			assert(c_write_only_by_owner || recSeq == mySeq);
			lockExp = reqNow + LOCK; r = R_OK
		:: else -> r = R_CCF
		fi;
		if
		:: nlost < MAXLOST && FAULT_OK -> nlost++; again = 1;      /* answer lost: re-sent */
			printf("MSC: c%d renew (o%d) answered %d (1 applied, 2 refused) but the answer is lost: re-sent\n", me, tok, r)
		:: ngive < MAXGIVEUP && FAULT_OK -> ngive++;               /* store error: next tick */
			printf("MSC: c%d renew (o%d) answered %d (1 applied, 2 refused), answer lost: tried again later\n", me, tok, r)
		:: ncrash < MAXCRASH && FAULT_OK ->
			printf("MSC: c%d renew (o%d) answered %d (1 applied, 2 refused), then\n", me, tok, r);
			CRASH
		:: true ->
			if
			:: r == R_OK -> myExp = reqNow + LOCK;
				printf("MSC: c%d renews o%d until %d\n", me, tok, myExp)
			:: else -> lost = 1;                   /* lock lost: fn's context cancelled */
				printf("MSC: c%d renewal refused: lock o%d lost, business function cancelled\n", me, tok)
			fi
		fi;
		r = R_NONE;
		if
		:: !again -> reqNow = 0
		:: else
		fi }
	:: atomic { ncrash < MAXCRASH && FAULT_OK -> CRASH }
	od;

#ifdef MUTANT_EMIT_SEND_BEFORE_COMMIT
	/* bug: the work's message is sent when the work returns, before its
	 * completion is written */
	atomic {
		if
		:: res == SUCCESS && stg ->
			printf("MSC: c%d sends o%d's message before its completion, id %d\n", me, tok, EMIT_ID(myFence, tok));
			EMIT_SEND(tok, EMIT_ID(myFence, tok))
		:: else
		fi }
#endif

	if
#ifdef TX
	:: res == SUCCESS -> goto commit
#else
	:: res == SUCCESS -> goto complete
#endif
	:: else -> goto release     /* TX: Rollback (local), then Release */
	fi;

#ifdef TX
	/* ---- Commit (lock.go hold.finishTx, locker.commit; store.Tx.Commit):
	 * the staged write and the record's COMPLETED update in one atomic step,
	 * conditioned on the lease's PROCESSING lock, owner and fence. until
	 * (expiresAt) is fixed at the first attempt: every repeat is the same
	 * request. ---- */
commit:
	do
	:: atomic {
		if
		:: !again -> reqNow = now
		:: else
		fi;
		again = 0;
		if
		:: TX_COMMIT_COND ->
			if
			:: assert(c_write_only_by_owner || recSeq == mySeq);
				assert(b_completed_only_after_success || workDone);
#ifdef MUTANT_TX_COMMIT_UNCONDITIONAL
				if
				:: st == ABSENT -> fence = SEED   /* the update creates a record, no fence */
				:: else
				fi;
#endif
#ifndef MUTANT_TX_EFFECT_OUTSIDE
				APPLY_EFFECT;
#endif
#ifdef EMIT
				EMIT_COMMIT;         /* the outbox commits with the rest */
#endif
				st = DONE; expAt = reqNow + WINDOW; lockExp = 0; r = R_OK;
				printf("MSC: c%d commits (o%d) at t=%d: effect and COMPLETED\n", me, tok, now)
			:: r = R_EFFECT;       /* a condition of the work's own writes fails: nothing applied */
				printf("MSC: c%d commit (o%d) refused by its own write's condition: nothing applied\n", me, tok)
			fi
		:: else ->
			/* Refused: nothing applied. The store reads the record (memstore:
			 * under its lock; DynamoDB: past the ClientRequestToken's life, one
			 * consistent read; PostgreSQL: after the connection broke): its
			 * own COMPLETED record, owner and fence, is an earlier attempt of
			 * this commit, applied, whose answer was lost: nil. One step with
			 * the refusal: that record stays as it is until its window ends. */
			if
			:: st == DONE && owner == tok && fence == myFence ->
#ifdef MUTANT_TX_REPEAT_APPLIES
				/* bug: the repeat passes on its own COMPLETED record, no read,
				 * and its writes are applied again */
				APPLY_EFFECT;
#endif
				r = R_OK;
				printf("MSC: c%d commit (o%d) repeated: its own earlier commit, recognised\n", me, tok)
			:: else -> r = R_CCF;
				printf("MSC: c%d commit (o%d) refused: record owner o%d, status %d: nothing applied\n", me, tok, owner, st)
			fi
		fi;
		if
		:: nlost < MAXLOST && FAULT_OK -> nlost++; again = 1;          /* answer lost: Commit again */
			printf("MSC: c%d commit (o%d) answered %d (1 ok, 2 lock lost, 3 effect refused) but the answer is lost: repeated\n", me, tok, r)
		:: ngive < MAXGIVEUP && FAULT_OK -> ngive++;                   /* unknown: uncommitted */
			printf("MSC: c%d commit (o%d) answered %d (1 ok, 2 lock lost, 3 effect refused), answer lost, gave up: uncommitted\n", me, tok, r);
			TX_UNKNOWN
		:: ncrash < MAXCRASH && FAULT_OK ->
			printf("MSC: c%d commit (o%d) answered %d (1 ok, 2 lock lost, 3 effect refused), then\n", me, tok, r);
			CRASH
		:: true ->
			if
#ifdef EMIT
			:: r == R_OK && stg ->         /* committed with its message */
				printf("MSC: c%d committed: relays its message\n", me);
				HOLDER_RELAY
			:: r == R_OK && !stg ->        /* processed */
				printf("MSC: c%d processed, deletes m%d\n", me, mi);
				DELETE_MSG; RESET_LOCALS; goto next
#else
			:: r == R_OK ->                /* processed */
				printf("MSC: c%d processed, deletes m%d\n", me, mi);
				DELETE_MSG; RESET_LOCALS; goto next
#endif
			:: r == R_EFFECT ->            /* failed: the work's failure, released */
				res = FAILURE; goto release
			:: r == R_CCF ->               /* failed, lock lost: not released */
				printf("MSC: c%d lock o%d lost: m%d redelivered later\n", me, tok, mi);
				REDELIVER
			fi
		fi }
	/* ErrNotCommitted: nothing applied, known. Also after an attempt that was
	 * applied, against store.Tx's contract: a store that misjudges its lost
	 * commit (PostgreSQL read while the lost COMMIT is still pending on the
	 * server) must not undo it; Release's PROCESSING condition sees to that. */
	:: atomic { ngive < MAXGIVEUP && FAULT_OK -> ngive++;
		printf("MSC: c%d commit (o%d) not committed (ErrNotCommitted): released\n", me, tok);
		res = FAILURE; goto release }
	:: atomic { ngive < MAXGIVEUP && FAULT_OK -> ngive++;   /* failed unapplied, unknown: uncommitted */
		printf("MSC: c%d commit (o%d) failed, outcome unknown: uncommitted\n", me, tok);
		TX_UNKNOWN }
	od;
#endif

#ifndef TX
	/* ---- Complete: UpdateItem if owner == o; every answer deletes ---- */
complete:
	do
	:: atomic {
		if
		:: !again -> reqNow = now
		:: else
		fi;
		again = 0;
		if
		:: COMPLETE_COND ->
			assert(c_write_only_by_owner || recSeq == mySeq);
			assert(b_completed_only_after_success || workDone);
#ifdef MUTANT_UNCONDITIONAL_COMPLETE
			/* on no record, the update creates one without a fence attribute:
			 * the next acquisition's if_not_exists seeds it from the clock */
			if
			:: st == ABSENT -> fence = SEED
			:: else
			fi;
#endif
#ifdef EMIT
			EMIT_COMMIT;       /* in the same UpdateItem (SET #outbox = :outbox) */
#endif
			st = DONE; expAt = reqNow + WINDOW; lockExp = 0; r = R_OK
		:: else -> oSt = st; oOwner = owner; r = R_CCF
		fi;
		if
		:: nlost < MAXLOST && FAULT_OK -> nlost++; again = 1;          /* answer lost: re-sent */
			printf("MSC: c%d complete (o%d) answered %d (1 applied, 2 refused) but the answer is lost: re-sent\n", me, tok, r)
		:: ngive < MAXGIVEUP && FAULT_OK -> ngive++;                   /* gave up: processed-unrecorded */
			printf("MSC: c%d complete (o%d) answered %d (1 applied, 2 refused), answer lost, gave up: processed-unrecorded\n", me, tok, r);
			COMPLETE_UNKNOWN
		:: ncrash < MAXCRASH && FAULT_OK ->
			printf("MSC: c%d complete (o%d) answered %d (1 applied, 2 refused), then\n", me, tok, r);
			CRASH
		:: true ->
			/* R_OK: processed; R_CCF with owner == o and COMPLETED: our own
			 * earlier attempt, processed; any other R_CCF: lock lost,
			 * processed-unrecorded. All three delete the message.
			 * With EMIT (the condition passes again on our own completion:
			 * R_OK), a completion written is relayed first; a refusal wrote
			 * nothing, and deletes. */
#ifdef EMIT
			if
			:: r == R_OK && stg ->
				printf("MSC: c%d complete (o%d) at t=%d applied: relays its message\n", me, tok, now);
				HOLDER_RELAY
			:: else
			fi;
#endif
			printf("MSC: c%d complete (o%d) at t=%d answered %d (1 applied, 2 refused; record owner o%d), deletes m%d\n", me, tok, now, r, owner, mi);
			DELETE_MSG; RESET_LOCALS; goto next
		fi }
	:: atomic { ngive < MAXGIVEUP && FAULT_OK -> ngive++;                /* failed unapplied, gave up */
		printf("MSC: c%d complete failed (store error): processed-unrecorded\n", me);
		COMPLETE_UNKNOWN }
	od;
#endif

	/* ---- Release: UpdateItem if owner == o and PROCESSING: RELEASED, lockExpiresAt = 0, the
	 * record and its fence kept (its TTL an hour away); the message is not
	 * deleted. A retry whose first attempt was applied passes again. ---- */
release:
	do
	:: atomic {
		again = 0;
		if
		:: RELEASE_COND ->
			assert(c_write_only_by_owner || recSeq == mySeq);
#ifdef MUTANT_RELEASE_DELETES
			st = ABSENT; owner = 0; lockExp = 0; expAt = 0; recSeq = 0; fence = 0;
			relDeleted = 1;
			printf("MSC: c%d releases o%d at t=%d: record deleted\n", me, tok, now)
#else
			st = REL; lockExp = 0; expAt = 0;
			printf("MSC: c%d releases o%d at t=%d: RELEASED, fence %d kept\n", me, tok, now, fence)
#endif
		:: else ->        /* absent: success; another owner: lock lost */
			printf("MSC: c%d release (o%d) refused: record owner o%d\n", me, tok, owner)
		fi;
		if
		:: nlost < MAXLOST && FAULT_OK -> nlost++; again = 1;  /* answer lost: re-sent */
			printf("MSC: c%d release (o%d): the answer is lost: re-sent\n", me, tok)
		:: ngive < MAXGIVEUP && FAULT_OK -> ngive++;           /* gave up: the lock expires on its own */
			printf("MSC: c%d release (o%d): the answer is lost, gave up\n", me, tok);
			break
		:: ncrash < MAXCRASH && FAULT_OK ->
			printf("MSC: c%d after its release (o%d)\n", me, tok);
			CRASH
		:: true -> break
		fi }
	:: atomic { ngive < MAXGIVEUP && FAULT_OK -> ngive++;           /* failed unapplied, gave up */
		printf("MSC: c%d release (o%d) failed (store error): the lock expires on its own\n", me, tok);
		break }
	od;

	/* ---- a permanent failure goes to the operator queue, then is deleted ---- */
#ifdef MUTANT_DELETE_BEFORE_FORWARD
	atomic {
		if
		:: res == PERMANENT -> DELETE_MSG
		:: else -> REDELIVER
		fi }
	atomic {
		if
		:: ncrash < MAXCRASH && FAULT_OK -> CRASH
		:: true -> fwd[mi] = 1; RESET_LOCALS; goto next
		fi }
#else
	atomic {
		if
		:: res == PERMANENT ->
			if
			:: fwd[mi] = 1;                /* the operator queue accepted it */
				printf("MSC: c%d forwards m%d to the operator queue\n", me, mi)
			:: REDELIVER                   /* it did not: retried */
			fi
		:: else -> REDELIVER
		fi }
	atomic {
		if
		:: ncrash < MAXCRASH && FAULT_OK -> CRASH      /* forwarded, not deleted: sent twice */
		:: true -> DELETE_MSG; RESET_LOCALS; goto next
		fi }
#endif

#ifdef EMIT
	/* ---- relay (emit.go locker.relay): the completion's message is sent
	 * (Sender.Send, its id from the completion's fence), then MarkSent
	 * removes the outbox if the record is still that completion. The
	 * holder relays its own (hold.completed), a duplicate the one it found
	 * pending (locker.duplicate); both then delete the message. Anything
	 * short of both steps succeeding is ErrEmitPending: the message is
	 * retried. The consumer may pause before each step. ---- */
relay:
#ifdef MUTANT_EMIT_MARK_BEFORE_SEND
	goto mark;     /* bug: MarkSent first, then the send */
sendmsg:
#endif
	atomic {
		if
		:: printf("MSC: c%d sends o%d's message, id %d, at t=%d: accepted\n", me, relW, EMIT_ID(relFence, tok), now);
			EMIT_SEND(relW, EMIT_ID(relFence, tok));
			if
			:: ngive < MAXGIVEUP && FAULT_OK -> ngive++;       /* applied, reported failed */
				printf("MSC: c%d: the send's answer is lost: reported failed\n", me);
				EMIT_PENDING
			:: ncrash < MAXCRASH && FAULT_OK ->                /* sent, not marked */
				printf("MSC: c%d after its send\n", me);
				CRASH
			:: true
			fi
		:: ngive < MAXGIVEUP && FAULT_OK -> ngive++;           /* refused, throttled, failed */
			printf("MSC: c%d: the send fails: not accepted\n", me);
			EMIT_PENDING
		fi;
#ifdef MUTANT_EMIT_MARK_BEFORE_SEND
		printf("MSC: c%d relayed o%d's message: deletes m%d\n", me, relW, mi);
		DELETE_MSG; RESET_LOCALS; goto next
#else
		skip
#endif
	}

	/* MarkSent (store.Store.MarkSent): one conditional UpdateItem */
mark:
	do
	:: atomic {
		if
		:: MARK_COND ->
			EMIT_MARK; r = R_OK
		:: else ->
			if
			:: st == ABSENT -> r = R_OK       /* gone: a success */
			:: else -> r = R_CCF              /* ErrRecordChanged: nothing written */
			fi
		fi;
		if
		:: nlost < MAXLOST && FAULT_OK -> nlost++;             /* answer lost: re-sent */
			printf("MSC: c%d mark sent (o%d, fence %d) answered %d (1 ok, 2 record changed) but the answer is lost: re-sent\n", me, relW, relFence, r)
		:: ngive < MAXGIVEUP && FAULT_OK -> ngive++;           /* answer lost, gave up */
			printf("MSC: c%d mark sent (o%d, fence %d) answered %d (1 ok, 2 record changed), answer lost, gave up\n", me, relW, relFence, r);
			EMIT_PENDING
		:: ncrash < MAXCRASH && FAULT_OK ->
			printf("MSC: c%d mark sent (o%d) answered %d (1 ok, 2 record changed), then\n", me, relW, r);
			CRASH
		:: true ->
			if
			:: r == R_OK ->
#ifdef MUTANT_EMIT_MARK_BEFORE_SEND
				goto sendmsg
#else
				printf("MSC: c%d relayed o%d's message: deletes m%d\n", me, relW, mi);
				DELETE_MSG; RESET_LOCALS; goto next
#endif
			:: else ->
				printf("MSC: c%d mark sent (o%d, fence %d) refused: the record is o%d's, status %d\n", me, relW, relFence, owner, st);
				EMIT_PENDING
			fi
		fi }
	:: atomic { ngive < MAXGIVEUP && FAULT_OK -> ngive++;      /* failed unapplied */
		printf("MSC: c%d mark sent (o%d) failed (store error)\n", me, relW);
		EMIT_PENDING }
	od;
#endif

stop:
	skip
}

/* The clock. */
active proctype Clock()
{
end:	do
	:: atomic { now < MAXT -> now++; printf("MSC: t=%d\n", now) }
	od
}

/* DynamoDB TTL: deletes a record, at any time after its TTL; the fence goes
 * with the item. A lock record (PROCESSING, RELEASED) has a TTL an hour past
 * its lock's expiry, which outlasts every Do call (a Lambda invocation, at
 * most 15 minutes) that held a lock on the record. The model keeps that order,
 * not the hour: TTL deletes an expired or released lock only once no consumer
 * is inside a Do whose acquisition was applied to the record. A COMPLETED
 * record's TTL is the end of its dedupe window, which may be short: TTL
 * deletes it at any time after that. */
active proctype TTL()
{
end:	do
	:: atomic { (((st == PROC && lockExp < now) || st == REL) && !held[0] && !held[1]) ||
	            (st == DONE && expAt < now) ->
		held[0] = 0; held[1] = 0;     /* a holder still in its Do holds nothing now */
		if
		:: st == PROC -> printf("MSC: TTL deletes the expired lock (owner o%d, fence %d)\n", owner, fence)
		:: st == REL  -> printf("MSC: TTL deletes the released lock (owner o%d, fence %d)\n", owner, fence)
		:: st == DONE -> printf("MSC: TTL deletes the completion (owner o%d, fence %d)\n", owner, fence)
		fi;
#ifdef EMIT
		EMIT_GONE;
#endif
		st = ABSENT; owner = 0; lockExp = 0; expAt = 0; recSeq = 0; fence = 0;
#ifdef MUTANT_RELEASE_DELETES
		relDeleted = 0;
#endif
		skip }
	od
}

/* The downstream store: delivers each write in flight, at any time (even
 * after its writer's lock expired, or its writer crashed), and accepts it
 * only if its fence is at least the highest it has accepted. */
#define DELIVER(c) \
	atomic { pend[c] -> \
		if \
		:: pendF[c] >= dsMax -> \
			assert(c_stale_write_refused || pendS[c] >= dsSeq); \
			printf("MSC: downstream accepts c%d's write, fence %d (highest so far %d)\n", c, pendF[c], dsMax); \
			dsMax = pendF[c]; dsSeq = pendS[c]; pendR[c] = 1 \
		:: else -> \
			printf("MSC: downstream refuses c%d's write, fence %d < %d\n", c, pendF[c], dsMax); \
			assert(c_current_write_accepted || pendS[c] < dsSeq); \
			pendR[c] = 2 \
		fi; \
		pend[c] = 0; pendF[c] = 0; pendS[c] = 0 }

#ifdef EMIT
/* emit_a, in every state: an outbox only on a completion, its own work's,
 * committed with it. */
active proctype Outbox()
{
end:	do
	:: atomic { !(EMIT_INV) ->
		printf("MSC: the record: status %d (2 COMPLETED), owner o%d, outbox o%d\n", st, owner, ob);
		assert(emit_a_outbox_iff_completion || EMIT_INV) }
	od
}
#endif

#ifndef TX
active proctype Downstream()
{
end:	do
	:: DELIVER(0)
	:: DELIVER(1)
	od
}
#endif

/* The last delivery's Acquire (init): with TX, at a time after every lock
 * and before the window's end; without, after every lock and before the
 * window of the completion it finds ends (see init). */
#ifdef TX
#define LAST_ACQUIRE ACQUIRE_COND(now)
#else
#define LAST_ACQUIRE (st != DONE)
#endif

init
{
#ifdef EMIT
	byte w;
#endif
	if
	:: drop = 0
	:: drop = 1
	fi;
	atomic { run Consumer(0); run Consumer(1) }
	(nfinished == NCONS);
	assert(d_no_message_left_received || (msg[0] != INF && msg[1] != INF));
#if defined(TX) || defined(EMIT)
	/* The last delivery, once the messages stop failing: the consumers are
	 * done (the bounds ran out, or the messages are gone) and nothing of
	 * theirs is in flight. A message still in SQS is delivered once more,
	 * after every lock has expired, and nothing fails: Acquire, the
	 * function, the completion (TX: the commit), the relay, with no fault.
	 * (e), TX: then K's effect is committed, unless every message went to
	 * the operator queue or was dropped (the documented loss of
	 * IN_PROGRESS=drop).
	 * EMIT: the delivery comes before the window of a completion it finds
	 * ends (SQS redelivers within the visibility timeout; the window is a
	 * day): a completion is a duplicate, and its pending message is relayed
	 * (sent, marked sent). Then emit_c: every committed message was
	 * received exactly once, but for one whose outbox went, still pending,
	 * with its completion after the window ended (winLost; with TX the
	 * window outlasts the run: never). */
	atomic {
#ifdef TX
		now = MAXT + LOCK + 1;
#endif
		if
		:: msg[0] == VIS || msg[1] == VIS ->
			printf("MSC: t=%d: the last delivery, with no fault\n", now);
			if
			:: LAST_ACQUIRE ->
#ifdef EMIT
				if
				:: st == ABSENT -> fence = SEED
				:: else
				fi;
				fence = fence + 1; owner = LASTW; ob = LASTW; committed[LASTW] = 1;
				printf("MSC: the last delivery acquires (fence %d) and completes, with o%d's message\n", fence, LASTW);
#endif
#ifdef TX
				APPLY_EFFECT;
#endif
				st = DONE; expAt = now + WINDOW; lockExp = 0
			:: else ->          /* a duplicate, or a key that stays blocked */
				printf("MSC: acquire refused: status %d (1 PROCESSING, 2 COMPLETED), owner o%d\n", st, owner)
			fi;
#ifdef EMIT
			if
			:: ob != 0 ->       /* relayed: sent, then marked sent */
				w = ob;
				printf("MSC: the last delivery sends o%d's message, id %d\n", w, EMIT_ID(fence, LASTW));
				EMIT_SEND(w, EMIT_ID(fence, LASTW));
				EMIT_MARK
			:: else
			fi;
#endif
			msg[0] = DEL; msg[1] = DEL
		:: else
		fi;
#ifdef TX
		assert(e_effect_at_least_once || eff > 0 ||
		       ((fwd[0] || dropped[0]) && (fwd[1] || dropped[1])));
#endif
#ifdef EMIT
		w = 1;
		do
		:: w < NW ->
			assert(emit_c_received_exactly_once || !committed[w] || winLost[w] || recvd[w] == 1);
			assert(emit_d_sent_only_if_committed || committed[w] || recvd[w] == 0);
			w++
		:: else -> break
		od;
#endif
		skip
	}
#endif
}
