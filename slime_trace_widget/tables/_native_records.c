/*
 * One carrier's raw records read into flat columns, in one pass: the native half
 * of carrier.read_carrier, for carriers whose every record is plain.
 *
 * read_records(records, fields, kinds, limits, first_span, first_event[, attempt]) takes the
 * carrier's list of record dicts, the record keys (type, name, ts, attempt, attrs,
 * span_id, parent_span_id), the record types (span_start, span_end, event), the
 * limits (largest |ts| kept, exclusive; largest attempt kept; how many open spans
 * a parent inference looks at) and the positions among all spans and events where
 * this carrier's begin, and the attempt a record without one takes (the carrier's,
 * default 0). It returns None, having
 * changed nothing, as soon as a record needs what only the Python pass does:
 * a record that is not exactly a dict; a ts that is not a float strictly within
 * the limit; a name, type, span id or parent id that is not exactly str; an
 * attempt that is not an int within 0 and the limit; attrs that are neither None
 * nor a dict; a span id started twice; an end whose span is not open (an end
 * recorded before its start, or a second end); or a parent inference that would
 * walk far past the open spans it may look at. Python then reads the carrier
 * again, with its warnings and repairs.
 *
 * Otherwise it returns the carrier's columns with the rules read_carrier states
 * (an end closes its open span; a start or event without a parent, or with the
 * parent id "", takes the most
 * recently started open span that began no later, among the last ``scan`` open
 * ones), parents found by position, and what read_carrier resolves after the
 * carrier: spans whose named parent had not started yet (``deferred``), spans
 * whose parent was inferred, events whose named parent had not started yet (as
 * positions among all events), the carrier's first position of each span id, and
 * how many records had an unknown type.
 *
 * Only exact builtin types are read, so no record's own code runs; values are
 * kept as the objects the records hold.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { TYPE, NAME, TS, ATTEMPT, ATTRS, SPAN_ID, PARENT_ID, FIELD_COUNT };
enum { START, END, EVENT, KIND_COUNT };
enum { SPAN_NAMES, SPAN_STARTS, SPAN_IDS, SPAN_PARENT_IDS, SPAN_PARENTS, SPAN_ATTEMPTS,
       SPAN_ATTRS, END_SPANS, END_TS, END_ATTEMPTS, END_ATTRS, EVENT_NAMES, EVENT_TS,
       EVENT_ATTEMPTS, EVENT_PARENT_IDS, EVENT_PARENTS, EVENT_ATTRS, DEFERRED, INFERRED,
       DEFERRED_EVENTS, LIST_COUNT };

/* How far past the open spans it may look at a parent inference may walk over
 * closed ones before the carrier is left to Python's bounded scan. */
#define WALK_FACTOR 8

typedef struct {
    PyObject *lists[LIST_COUNT];
    PyObject *first_by_id; /* span id -> its position among all spans */
    double *starts;        /* by position in this carrier */
    Py_ssize_t *open;      /* positions of started spans in order, none ended at its end */
    char *is_open;
    Py_ssize_t open_count, span_count, event_count;
    Py_ssize_t first_span, first_event, scan;
    long long unknown_types;
    long long default_attempt; /* for a record without one: the carrier's attempt */
} Reading;

static void
free_reading(Reading *reading)
{
    for (int at = 0; at < LIST_COUNT; at++) {
        Py_XDECREF(reading->lists[at]);
    }
    Py_XDECREF(reading->first_by_id);
    PyMem_RawFree(reading->starts);
    PyMem_RawFree(reading->open);
    PyMem_RawFree(reading->is_open);
}

/* Append a new reference (stolen) to list ``which``; -1 on error. */
static int
append_new(Reading *reading, int which, PyObject *value)
{
    if (value == NULL) {
        return -1;
    }
    int failed = PyList_Append(reading->lists[which], value);
    Py_DECREF(value);
    return failed;
}

static int
append(Reading *reading, int which, PyObject *value)
{
    return PyList_Append(reading->lists[which], value);
}

/* The open span the record at ``ts`` hangs under: its position in this carrier,
 * -1 for none, -2 when the walk would go too far (the carrier goes to Python). */
static Py_ssize_t
infer_parent(Reading *reading, double ts)
{
    Py_ssize_t seen = 0, walked = 0;
    for (Py_ssize_t at = reading->open_count - 1; at >= 0 && seen < reading->scan; at--) {
        if (++walked > WALK_FACTOR * reading->scan) {
            return -2;
        }
        Py_ssize_t position = reading->open[at];
        if (!reading->is_open[position]) {
            continue;
        }
        seen++;
        if (reading->starts[position] <= ts) {
            return position;
        }
    }
    return -1;
}

/* Close the span at ``position``; ended spans at the end of the open list leave it. */
static void
close_span(Reading *reading, Py_ssize_t position)
{
    reading->is_open[position] = 0;
    while (reading->open_count > 0 && !reading->is_open[reading->open[reading->open_count - 1]]) {
        reading->open_count--;
    }
}

/* The parent a start or event names or infers: its id (borrowed) and position among
 * all spans (-1: none yet); 0 when the carrier goes to Python, -1 on error. */
static int
find_parent(Reading *reading, double ts, PyObject **parent_id, Py_ssize_t *parent,
            int *inferred)
{
    *parent = -1;
    *inferred = 0;
    if (*parent_id == Py_None) {
        Py_ssize_t found = infer_parent(reading, ts);
        if (found == -2) {
            return 0;
        }
        if (found >= 0) {
            *parent = reading->first_span + found;
            *parent_id = PyList_GET_ITEM(reading->lists[SPAN_IDS], found);
            *inferred = 1;
        }
        return 1;
    }
    PyObject *known = PyDict_GetItemWithError(reading->first_by_id, *parent_id);
    if (known != NULL) {
        *parent = PyLong_AsSsize_t(known);
    }
    return PyErr_Occurred() ? -1 : 1;
}

static int
read_start(Reading *reading, PyObject *name, PyObject *ts_value, double ts, PyObject *span_id,
           PyObject *parent_id, PyObject *attempt, PyObject *attrs)
{
    int known = PyDict_Contains(reading->first_by_id, span_id);
    if (known != 0) {
        return known < 0 ? -1 : 0; /* a span id started twice: Python's repairs */
    }
    Py_ssize_t parent;
    int inferred;
    int found = find_parent(reading, ts, &parent_id, &parent, &inferred);
    if (found <= 0) {
        return found;
    }
    Py_ssize_t position = reading->span_count;
    PyObject *index = PyLong_FromSsize_t(reading->first_span + position);
    if (index == NULL) {
        return -1;
    }
    int failed = PyDict_SetItem(reading->first_by_id, span_id, index);
    if (!failed && parent < 0 && parent_id != Py_None) {
        failed = append(reading, DEFERRED, index);
    }
    if (!failed && inferred) {
        failed = append(reading, INFERRED, index);
    }
    Py_DECREF(index);
    if (failed || append(reading, SPAN_NAMES, name) || append(reading, SPAN_STARTS, ts_value)
        || append(reading, SPAN_IDS, span_id) || append(reading, SPAN_PARENT_IDS, parent_id)
        || append_new(reading, SPAN_PARENTS, PyLong_FromSsize_t(parent))
        || append(reading, SPAN_ATTEMPTS, attempt) || append(reading, SPAN_ATTRS, attrs)) {
        return -1;
    }
    reading->starts[position] = ts;
    reading->is_open[position] = 1;
    reading->open[reading->open_count++] = position;
    reading->span_count++;
    return 1;
}

static int
read_end(Reading *reading, PyObject *ts_value, PyObject *span_id, PyObject *attempt,
         PyObject *attrs)
{
    PyObject *known = PyDict_GetItemWithError(reading->first_by_id, span_id);
    if (known == NULL) {
        return PyErr_Occurred() ? -1 : 0; /* recorded before its start */
    }
    Py_ssize_t position = PyLong_AsSsize_t(known) - reading->first_span;
    if (!reading->is_open[position]) {
        return 0; /* a second end */
    }
    close_span(reading, position);
    if (append(reading, END_SPANS, known) || append(reading, END_TS, ts_value)
        || append(reading, END_ATTEMPTS, attempt) || append(reading, END_ATTRS, attrs)) {
        return -1;
    }
    return 1;
}

static int
read_event(Reading *reading, PyObject *name, PyObject *ts_value, double ts, PyObject *parent_id,
           PyObject *attempt, PyObject *attrs)
{
    int named = parent_id != Py_None;
    Py_ssize_t parent;
    int inferred;
    int found = find_parent(reading, ts, &parent_id, &parent, &inferred);
    if (found <= 0) {
        return found;
    }
    if (named && parent < 0
        && append_new(reading, DEFERRED_EVENTS,
                      PyLong_FromSsize_t(reading->first_event + reading->event_count))) {
        return -1;
    }
    if (append(reading, EVENT_NAMES, name) || append(reading, EVENT_TS, ts_value)
        || append(reading, EVENT_ATTEMPTS, attempt) || append(reading, EVENT_PARENT_IDS, parent_id)
        || append_new(reading, EVENT_PARENTS, PyLong_FromSsize_t(parent))
        || append(reading, EVENT_ATTRS, attrs)) {
        return -1;
    }
    reading->event_count++;
    return 1;
}

/* 1: read; 0: the carrier needs Python; -1: error. ``values`` are the record's
 * fields (strong references, NULL where absent), in the order of ``keys``. */
static int
read_fields(Reading *reading, PyObject **values, PyObject *const *kinds, double ts_limit,
            long long max_attempt)
{
    PyObject *ts_value = values[TS], *name = values[NAME], *attempt = values[ATTEMPT];
    if (ts_value == NULL || !PyFloat_CheckExact(ts_value)) {
        return 0;
    }
    double ts = PyFloat_AS_DOUBLE(ts_value);
    if (!(ts > -ts_limit && ts < ts_limit)) {
        return 0;
    }
    if (name == NULL || !PyUnicode_CheckExact(name)) {
        return 0;
    }
    long long attempt_number = reading->default_attempt;
    if (attempt != NULL) {
        if (!PyLong_CheckExact(attempt)) {
            return 0;
        }
        int overflow = 0;
        attempt_number = PyLong_AsLongLongAndOverflow(attempt, &overflow);
        if (attempt_number == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (overflow || attempt_number < 0 || attempt_number > max_attempt) {
            return 0;
        }
    }
    PyObject *attrs = values[ATTRS] == NULL ? Py_None : values[ATTRS];
    if (attrs != Py_None) {
        if (!PyDict_CheckExact(attrs)) {
            return 0;
        }
        if (PyDict_GET_SIZE(attrs) == 0) {
            attrs = Py_None; /* an empty dict reads as no attributes */
        }
    }
    PyObject *kind = values[TYPE];
    int which = KIND_COUNT;
    if (kind != NULL && kind != Py_None) {
        if (!PyUnicode_CheckExact(kind)) {
            return 0;
        }
        for (int at = 0; at < KIND_COUNT; at++) {
            if (kind == kinds[at] || PyUnicode_Compare(kind, kinds[at]) == 0) {
                which = at;
                break;
            }
        }
    }
    if (which == KIND_COUNT) {
        reading->unknown_types++;
        return 1;
    }
    PyObject *span_id = values[SPAN_ID];
    PyObject *parent_id = values[PARENT_ID] == NULL ? Py_None : values[PARENT_ID];
    if (PyUnicode_CheckExact(parent_id) && PyUnicode_GET_LENGTH(parent_id) == 0) {
        parent_id = Py_None; /* "" names no parent, as in slime's viewer */
    }
    if (which != END && parent_id != Py_None && !PyUnicode_CheckExact(parent_id)) {
        return 0;
    }
    if (which != EVENT && (span_id == NULL || !PyUnicode_CheckExact(span_id))) {
        return 0;
    }
    PyObject *attempt_object = attempt != NULL ? Py_NewRef(attempt)
                                               : PyLong_FromLongLong(attempt_number);
    if (attempt_object == NULL) {
        return -1;
    }
    int result;
    if (which == START) {
        result = read_start(reading, name, ts_value, ts, span_id, parent_id, attempt_object,
                            attrs);
    } else if (which == END) {
        result = read_end(reading, ts_value, span_id, attempt_object, attrs);
    } else {
        result = read_event(reading, name, ts_value, ts, parent_id, attempt_object, attrs);
    }
    Py_DECREF(attempt_object);
    return result;
}

static PyObject *
read_records(PyObject *module, PyObject *args)
{
    PyObject *records, *fields, *kinds;
    double ts_limit;
    long long max_attempt;
    Py_ssize_t first_span, first_event, scan;
    long long default_attempt = 0;
    if (!PyArg_ParseTuple(args, "O!O!O!(dLn)nn|L:read_records", &PyList_Type, &records,
                          &PyTuple_Type, &fields, &PyTuple_Type, &kinds, &ts_limit,
                          &max_attempt, &scan, &first_span, &first_event,
                          &default_attempt)) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(fields) != FIELD_COUNT || PyTuple_GET_SIZE(kinds) != KIND_COUNT) {
        PyErr_SetString(PyExc_ValueError, "read_records needs 7 record keys and 3 record types");
        return NULL;
    }
    if (default_attempt < 0 || default_attempt > max_attempt) {
        PyErr_SetString(PyExc_ValueError, "read_records: the default attempt is out of range");
        return NULL;
    }
    if (scan < 0 || scan > PY_SSIZE_T_MAX / WALK_FACTOR || first_span < 0 || first_event < 0
        || first_span > PY_SSIZE_T_MAX / 2 || first_event > PY_SSIZE_T_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "read_records: scan or a first row is out of range");
        return NULL;
    }
    PyObject *keys[FIELD_COUNT], *kind_names[KIND_COUNT];
    for (int at = 0; at < FIELD_COUNT; at++) {
        keys[at] = PyTuple_GET_ITEM(fields, at);
    }
    for (int at = 0; at < KIND_COUNT; at++) {
        kind_names[at] = PyTuple_GET_ITEM(kinds, at);
        if (!PyUnicode_CheckExact(kind_names[at])) {
            PyErr_SetString(PyExc_TypeError, "record types must be str");
            return NULL;
        }
    }
    Reading reading;
    memset(&reading, 0, sizeof reading);
    reading.first_span = first_span;
    reading.first_event = first_event;
    reading.scan = scan;
    reading.default_attempt = default_attempt;
    Py_ssize_t count = PyList_GET_SIZE(records);
    size_t room = (size_t)(count ? count : 1);
    reading.starts = PyMem_RawMalloc(room * sizeof(double));
    reading.open = PyMem_RawMalloc(room * sizeof(Py_ssize_t));
    reading.is_open = PyMem_RawCalloc(room, 1);
    reading.first_by_id = PyDict_New();
    if (reading.starts == NULL || reading.open == NULL || reading.is_open == NULL) {
        PyErr_NoMemory();
        free_reading(&reading);
        return NULL;
    }
    for (int at = 0; at < LIST_COUNT; at++) {
        reading.lists[at] = PyList_New(0);
        if (reading.lists[at] == NULL) {
            free_reading(&reading);
            return NULL;
        }
    }
    if (reading.first_by_id == NULL) {
        free_reading(&reading);
        return NULL;
    }
    /* Each record and its fields are held while read: a lookup compares keys, and a
     * key of a type other than str could run code that changes the records. */
    for (Py_ssize_t at = 0; at < count && at < PyList_GET_SIZE(records); at++) {
        PyObject *record = Py_NewRef(PyList_GET_ITEM(records, at));
        PyObject *values[FIELD_COUNT] = {NULL};
        int read = PyDict_CheckExact(record);
        for (int key = 0; read > 0 && key < FIELD_COUNT; key++) {
            values[key] = Py_XNewRef(PyDict_GetItemWithError(record, keys[key]));
            if (values[key] == NULL && PyErr_Occurred()) {
                read = -1;
            }
        }
        if (read > 0) {
            read = read_fields(&reading, values, kind_names, ts_limit, max_attempt);
        }
        for (int key = 0; key < FIELD_COUNT; key++) {
            Py_XDECREF(values[key]);
        }
        Py_DECREF(record);
        if (read <= 0) {
            free_reading(&reading);
            if (read < 0) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
    }
    PyObject *result = PyTuple_New(LIST_COUNT + 2);
    if (result == NULL) {
        free_reading(&reading);
        return NULL;
    }
    for (int at = 0; at < LIST_COUNT; at++) {
        PyTuple_SET_ITEM(result, at, reading.lists[at]);
        reading.lists[at] = NULL;
    }
    PyTuple_SET_ITEM(result, LIST_COUNT, reading.first_by_id);
    reading.first_by_id = NULL;
    PyObject *unknown = PyLong_FromLongLong(reading.unknown_types);
    free_reading(&reading);
    if (unknown == NULL) {
        Py_DECREF(result);
        return NULL;
    }
    PyTuple_SET_ITEM(result, LIST_COUNT + 1, unknown);
    return result;
}

static PyMethodDef methods[] = {
    {"read_records", read_records, METH_VARARGS,
     "One carrier's plain records as columns, or None when Python must read them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_native_records",
    "One carrier's raw records read into flat columns, in one pass.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__native_records(void)
{
    return PyModule_Create(&module_definition);
}
