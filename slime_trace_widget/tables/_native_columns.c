/*
 * Attribute dicts grouped by key tuple and laid out as typed columns, in one pass
 * (``_native_dicts.c`` makes the dicts again from the columns).
 *
 * The native half of attr_grouping.group_by_keys. Python's version reads each
 * dict's values into a list, then each value again for its type and once more
 * to convert it. Here each value is read once, its type checked by pointer and
 * its number or text copied into its column's buffer.
 *
 * lay_columns(dicts) takes the list attr_columns groups (dicts, None or {} for a
 * row without attributes) and returns either None, when a row is not a dict or a
 * key is not ASCII text (Python's version handles those rows), or a list with one
 * (keys, members, columns) per key tuple, in first-seen order: ``keys`` the tuple,
 * ``members`` the rows' positions as native int64 bytes, and ``columns`` one entry
 * per key: (kind, data, offsets) when every value of that key over the group's
 * rows is of one kind, else None (Python converts that key's values, as it would
 * have). Kinds: 'f' float (float64 bytes), 'i' int within int64 (int64 bytes),
 * 'b' bool (one byte each), 's' ASCII text (its bytes, and int32 offsets).
 *
 * Only exact builtin types count (a subclass is not plain), so no value's own code
 * runs. The one Python code that can run is a finalizer, in a collection that making
 * a key tuple may start: each row is held while it is read, and a dict whose size
 * changed meanwhile is an error (RuntimeError), never a read past its end.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum Kind { UNSET = 0, FLOAT = 'f', INT = 'i', BOOL = 'b', TEXT = 's', NEEDS_PYTHON = 'x' };

/* One key's values over one group's rows, as far as they are of one kind. */
typedef struct {
    char kind;
    char *data;
    Py_ssize_t length, capacity;
    int32_t *offsets; /* TEXT: where each value ends in data, after a leading 0 */
    Py_ssize_t offset_count, offset_capacity;
} Column;

/* The rows that share one key tuple. */
typedef struct {
    PyObject *keys; /* tuple of str, owned */
    Py_ssize_t width;
    int64_t *members;
    Py_ssize_t rows, member_capacity;
    Column *columns; /* width of them */
} Group;

/* Room for ``needed`` items of ``item_size`` bytes in ``*buffer``, doubling. */
static int
reserve(void **buffer, Py_ssize_t *capacity, Py_ssize_t needed, size_t item_size)
{
    if (needed <= *capacity) {
        return 0;
    }
    Py_ssize_t size = *capacity ? *capacity : 64;
    while (size < needed) {
        if (size > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)item_size) {
            PyErr_NoMemory();
            return -1;
        }
        size *= 2;
    }
    void *larger = PyMem_RawRealloc(*buffer, (size_t)size * item_size);
    if (larger == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buffer = larger;
    *capacity = size;
    return 0;
}

/* The column is left to Python: its buffers are not needed any more. */
static void
give_up(Column *column)
{
    PyMem_RawFree(column->data);
    PyMem_RawFree(column->offsets);
    memset(column, 0, sizeof(Column));
    column->kind = NEEDS_PYTHON;
}

static char
kind_of(PyObject *value)
{
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyFloat_Type) {
        return FLOAT;
    }
    if (type == &PyLong_Type) {
        return INT;
    }
    if (type == &PyBool_Type) {
        return BOOL;
    }
    if (type == &PyUnicode_Type && PyUnicode_IS_ASCII(value)) {
        return TEXT;
    }
    return NEEDS_PYTHON;
}

static int
append_bytes(Column *column, const void *bytes, Py_ssize_t size)
{
    if (size == 0) { /* the column's data may not be allocated yet: nothing to copy */
        return 0;
    }
    if (reserve((void **)&column->data, &column->capacity, column->length + size, 1) < 0) {
        return -1;
    }
    memcpy(column->data + column->length, bytes, (size_t)size);
    column->length += size;
    return 0;
}

/* Add one value to its column, or hand the column to Python. */
static int
append_value(Column *column, PyObject *value)
{
    char kind = kind_of(value);
    if (column->kind == UNSET) {
        column->kind = kind;
    }
    if (kind != column->kind || kind == NEEDS_PYTHON) {
        give_up(column);
        return 0;
    }
    if (kind == FLOAT) {
        double number = PyFloat_AS_DOUBLE(value);
        return append_bytes(column, &number, sizeof number);
    }
    if (kind == INT) {
        int overflow = 0;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow) {
            give_up(column);
            return 0;
        }
        if (number == -1 && PyErr_Occurred()) {
            return -1;
        }
        int64_t wide = (int64_t)number;
        return append_bytes(column, &wide, sizeof wide);
    }
    if (kind == BOOL) {
        char flag = value == Py_True;
        return append_bytes(column, &flag, 1);
    }
    Py_ssize_t size = PyUnicode_GET_LENGTH(value); /* ASCII: one byte per character */
    if (column->length + size > INT32_MAX) { /* past Arrow's 32-bit offsets */
        give_up(column);
        return 0;
    }
    Py_ssize_t ends = column->offset_count ? column->offset_count + 1 : 2;
    if (reserve((void **)&column->offsets, &column->offset_capacity, ends, sizeof(int32_t)) < 0) {
        return -1;
    }
    if (column->offset_count == 0) {
        column->offsets[column->offset_count++] = 0;
    }
    if (append_bytes(column, PyUnicode_DATA(value), size) < 0) {
        return -1;
    }
    column->offsets[column->offset_count++] = (int32_t)column->length;
    return 0;
}

static void
free_groups(Group *groups, Py_ssize_t count)
{
    for (Py_ssize_t at = 0; at < count; at++) {
        if (groups[at].columns != NULL) {
            for (Py_ssize_t key = 0; key < groups[at].width; key++) {
                give_up(&groups[at].columns[key]);
            }
        }
        PyMem_RawFree(groups[at].columns);
        PyMem_RawFree(groups[at].members);
        Py_XDECREF(groups[at].keys);
    }
    PyMem_RawFree(groups);
}

/* Whether ``value``'s keys are, object for object, those of ``group``. */
static int
same_keys(Group *group, PyObject *value)
{
    Py_ssize_t cursor = 0, slot = 0;
    PyObject *key, *item;
    while (PyDict_Next(value, &cursor, &key, &item)) {
        if (key != PyTuple_GET_ITEM(group->keys, slot++)) {
            return 0;
        }
    }
    return 1;
}

/* ``value``'s keys as a tuple; NULL with no error set when one is not ASCII text.
 * Making the tuple may run a collection, whose finalizers are Python code that could
 * change the dict: one that no longer has ``width`` keys is an error. */
static PyObject *
key_tuple(PyObject *value, Py_ssize_t width)
{
    PyObject *keys = PyTuple_New(width);
    if (keys == NULL) {
        return NULL;
    }
    Py_ssize_t cursor = 0, slot = 0;
    PyObject *key, *item;
    while (PyDict_Next(value, &cursor, &key, &item)) {
        if (slot == width) {
            break;
        }
        if (!PyUnicode_CheckExact(key) || !PyUnicode_IS_ASCII(key)) {
            Py_DECREF(keys);
            return NULL;
        }
        Py_INCREF(key);
        PyTuple_SET_ITEM(keys, slot++, key);
    }
    if (slot != width || PyDict_GET_SIZE(value) != width) {
        Py_DECREF(keys);
        PyErr_SetString(PyExc_RuntimeError, "an attribute dict changed while it was read");
        return NULL;
    }
    return keys;
}

/* The group of a key tuple met for the first time. */
static Group *
new_group(Group **groups, Py_ssize_t *count, Py_ssize_t *capacity, PyObject *keys,
          Py_ssize_t width)
{
    if (reserve((void **)groups, capacity, *count + 1, sizeof(Group)) < 0) {
        return NULL;
    }
    Group *group = &(*groups)[*count];
    memset(group, 0, sizeof(Group));
    group->columns = PyMem_RawCalloc((size_t)width, sizeof(Column));
    if (group->columns == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_INCREF(keys);
    group->keys = keys;
    group->width = width;
    (*count)++;
    return group;
}

static PyObject *
column_result(Column *column)
{
    if (column->kind == NEEDS_PYTHON || column->kind == UNSET) {
        Py_RETURN_NONE;
    }
    PyObject *data = PyBytes_FromStringAndSize(column->data ? column->data : "", column->length);
    if (data == NULL) {
        return NULL;
    }
    PyObject *offsets = column->kind != TEXT ? Py_NewRef(Py_None)
        : PyBytes_FromStringAndSize((const char *)column->offsets,
                                    column->offset_count * (Py_ssize_t)sizeof(int32_t));
    if (offsets == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    return Py_BuildValue("(CNN)", column->kind, data, offsets);
}

static PyObject *
groups_result(Group *groups, Py_ssize_t count)
{
    PyObject *result = PyList_New(count);
    if (result == NULL) {
        return NULL;
    }
    for (Py_ssize_t at = 0; at < count; at++) {
        Group *group = &groups[at];
        PyObject *columns = PyList_New(group->width);
        if (columns == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        for (Py_ssize_t key = 0; key < group->width; key++) {
            PyObject *column = column_result(&group->columns[key]);
            if (column == NULL) {
                Py_DECREF(columns);
                Py_DECREF(result);
                return NULL;
            }
            PyList_SET_ITEM(columns, key, column);
        }
        PyObject *members = PyBytes_FromStringAndSize(
            (const char *)group->members, group->rows * (Py_ssize_t)sizeof(int64_t));
        PyObject *entry = members == NULL ? NULL
                          : Py_BuildValue("(ONN)", group->keys, members, columns);
        if (entry == NULL) {
            if (members == NULL) {
                Py_DECREF(columns);
            }
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, at, entry);
    }
    return result;
}

static PyObject *
lay_columns(PyObject *module, PyObject *dicts)
{
    if (!PyList_CheckExact(dicts)) {
        PyErr_SetString(PyExc_TypeError, "lay_columns takes a list");
        return NULL;
    }
    PyObject *index = PyDict_New(); /* key tuple -> its group's number */
    if (index == NULL) {
        return NULL;
    }
    Group *groups = NULL;
    Py_ssize_t count = 0, capacity = 0, last = -1;
    PyObject *result = NULL;
    /* Each row is held while it is read: a collection run by an allocation below
     * may run finalizers, which could drop it from the list. */
    PyObject *value = NULL;
    for (Py_ssize_t position = 0; position < PyList_GET_SIZE(dicts); position++) {
        Py_XSETREF(value, Py_NewRef(PyList_GET_ITEM(dicts, position)));
        if (value == Py_None) {
            continue;
        }
        if (!PyDict_CheckExact(value)) {
            goto leave_to_python;
        }
        Py_ssize_t width = PyDict_GET_SIZE(value);
        if (width == 0) {
            continue;
        }
        /* Rows of one kind of span come in runs: try the previous row's group first. */
        Group *group = NULL;
        if (last >= 0 && groups[last].width == width && same_keys(&groups[last], value)) {
            group = &groups[last];
        }
        if (group == NULL) {
            PyObject *keys = key_tuple(value, width);
            if (keys == NULL) {
                if (PyErr_Occurred()) {
                    goto fail;
                }
                goto leave_to_python;
            }
            PyObject *number = PyDict_GetItemWithError(index, keys);
            if (number != NULL) {
                last = PyLong_AsSsize_t(number);
                group = &groups[last];
            } else if (!PyErr_Occurred()) {
                number = PyLong_FromSsize_t(count);
                if (number == NULL || PyDict_SetItem(index, keys, number) < 0) {
                    Py_XDECREF(number);
                    Py_DECREF(keys);
                    goto fail;
                }
                Py_DECREF(number);
                last = count;
                group = new_group(&groups, &count, &capacity, keys, width);
            }
            Py_DECREF(keys);
            if (group == NULL) {
                goto fail;
            }
        }
        if (reserve((void **)&group->members, &group->member_capacity, group->rows + 1,
                    sizeof(int64_t)) < 0) {
            goto fail;
        }
        group->members[group->rows++] = position;
        if (PyDict_GET_SIZE(value) != group->width) {
            PyErr_SetString(PyExc_RuntimeError, "an attribute dict changed while it was read");
            goto fail;
        }
        Py_ssize_t cursor = 0, slot = 0;
        PyObject *key, *item;
        while (PyDict_Next(value, &cursor, &key, &item)) {
            Column *column = &group->columns[slot++];
            if (column->kind != NEEDS_PYTHON && append_value(column, item) < 0) {
                goto fail;
            }
        }
    }
    Py_XDECREF(value);
    result = groups_result(groups, count);
    free_groups(groups, count);
    Py_DECREF(index);
    return result;
leave_to_python:
    Py_XDECREF(value);
    free_groups(groups, count);
    Py_DECREF(index);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(value);
    free_groups(groups, count);
    Py_DECREF(index);
    return NULL;
}

/* ------------------------------------------------------------------ back to dicts */

static PyMethodDef methods[] = {
    {"lay_columns", lay_columns, METH_O,
     "Attribute dicts grouped by key tuple, each key's values as one typed column."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_native_columns",
    "Attribute dicts laid out as typed columns in one pass.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__native_columns(void)
{
    return PyModule_Create(&module_definition);
}
