/*
 * Attribute dicts made again from the typed columns that _native_columns.c lays out:
 * the dicts of ``TraceFrames.spans`` and ``.events`` (attr_python.table_dicts).
 *
 * row_dicts(names, columns, patterns, pattern_columns): ``names`` the column names
 * (str); ``columns`` each column's values: a list or a 1-D numpy array of Python
 * objects, or a C-contiguous buffer of float64, int64 or bool, which become the
 * floats, ints and bools numpy's tolist() makes; ``patterns`` one int64 per row naming its entry of
 * ``pattern_columns``, the tuple of the columns that row has, in order. It returns
 * a list with each row's dict (keys in the pattern's order) or None for a row with
 * no column, made a block of rows at a time. Its keys are exact str, so setting
 * them calls no Python code. A collection started by an allocation may run
 * finalizers: the columns and patterns are read from tuples this call holds, and a
 * list column that changed length meanwhile is an error, never a read past its end.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* One column of row_dicts: Python objects, one per row (a list's or a numpy array's),
 * or a numeric buffer whose items become ints, floats or bools as numpy's tolist()
 * would make them. */
typedef struct {
    PyObject *objects; /* a list, or NULL */
    PyObject *const *items; /* a numpy array's objects, or NULL */
    Py_buffer buffer;
    char format;
} Values;

/* The buffer's item kind: 'd' float64, 'q' int64 or '?' bool, native (any byte-order
 * mark is the native one's); 0 for anything else. */
static char
buffer_kind(const Py_buffer *buffer)
{
    const char *format = buffer->format ? buffer->format : "B";
    if (*format == '@' || *format == '=') {
        format++;
    }
    if (format[0] == '\0' || format[1] != '\0') {
        return 0;
    }
    if (format[0] == 'd' && buffer->itemsize == sizeof(double)) {
        return 'd';
    }
    if ((format[0] == 'l' || format[0] == 'q') && buffer->itemsize == sizeof(int64_t)) {
        return 'q';
    }
    if (format[0] == '?' && buffer->itemsize == 1) {
        return '?';
    }
    return 0;
}

/* A new reference to the value of ``values`` at ``row``. */
static PyObject *
value_at(Values *values, Py_ssize_t row)
{
    if (values->objects != NULL) {
        if (row >= PyList_GET_SIZE(values->objects)) {
            PyErr_SetString(PyExc_RuntimeError, "a column changed while it was read");
            return NULL;
        }
        return Py_NewRef(PyList_GET_ITEM(values->objects, row));
    }
    if (values->items != NULL) {
        return Py_NewRef(values->items[row]);
    }
    const char *item = (const char *)values->buffer.buf + row * values->buffer.itemsize;
    if (values->format == 'd') {
        double number;
        memcpy(&number, item, sizeof number);
        return PyFloat_FromDouble(number);
    }
    if (values->format == 'q') {
        int64_t number;
        memcpy(&number, item, sizeof number);
        return PyLong_FromLongLong(number);
    }
    return PyBool_FromLong(*item != 0);
}

static void
release_values(Values *values, Py_ssize_t count)
{
    for (Py_ssize_t at = 0; at < count; at++) {
        if (values[at].buffer.obj != NULL) {
            PyBuffer_Release(&values[at].buffer);
        }
    }
    PyMem_RawFree(values);
}

/* The objects of ``column`` when it is a 1-D, C-contiguous numpy array of ``rows``
 * objects (exactly ``ndarray``, numpy's own type, or NULL when numpy is not loaded),
 * found through numpy's documented array interface (its ``data`` address holds one
 * PyObject pointer per item, typestr ``|O``); NULL, with no exception set, for
 * anything else. The caller keeps the array alive while the pointers are used. */
static PyObject *const *
object_array_items(PyObject *column, Py_ssize_t rows, PyObject *ndarray)
{
    if (ndarray == NULL || (PyObject *)Py_TYPE(column) != ndarray) {
        return NULL;
    }
    PyObject *interface = PyObject_GetAttrString(column, "__array_interface__");
    if (interface == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *const *items = NULL;
    PyObject *typestr = PyDict_Check(interface)
                        ? PyDict_GetItemString(interface, "typestr") : NULL;
    PyObject *shape = typestr ? PyDict_GetItemString(interface, "shape") : NULL;
    PyObject *strides = shape ? PyDict_GetItemString(interface, "strides") : NULL;
    PyObject *data = strides ? PyDict_GetItemString(interface, "data") : NULL;
    int objects = data != NULL && PyUnicode_Check(typestr)
                  && PyUnicode_CompareWithASCIIString(typestr, "|O") == 0;
    int one_row_each = objects && strides == Py_None && PyTuple_Check(shape)
                       && PyTuple_GET_SIZE(shape) == 1
                       && PyLong_Check(PyTuple_GET_ITEM(shape, 0))
                       && PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0)) == rows;
    if (one_row_each && PyTuple_Check(data) && PyTuple_GET_SIZE(data) == 2
        && PyLong_Check(PyTuple_GET_ITEM(data, 0))) {
        items = (PyObject *const *)PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    }
    PyErr_Clear(); /* a lookup or conversion that failed: not such an array */
    Py_DECREF(interface);
    return items;
}

/* numpy's ndarray type when numpy is loaded (a new reference), else NULL: an array
 * of objects can only exist once numpy is. NULL with an exception set on failure. */
static PyObject *
loaded_ndarray(void)
{
    PyObject *name = PyUnicode_FromString("numpy");
    if (name == NULL) {
        return NULL;
    }
    PyObject *numpy = PyImport_GetModule(name);
    Py_DECREF(name);
    if (numpy == NULL) {
        return NULL; /* not loaded (no exception), or the lookup failed (one set) */
    }
    PyObject *ndarray = PyObject_GetAttrString(numpy, "ndarray");
    Py_DECREF(numpy);
    if (ndarray != NULL && !PyType_Check(ndarray)) {
        Py_CLEAR(ndarray);
        PyErr_SetString(PyExc_TypeError, "numpy.ndarray is not a type");
    }
    return ndarray;
}

/* Each column of ``columns`` (a tuple of lists, numpy arrays of objects or numeric
 * buffers, each of ``rows`` items) as Values; NULL with an exception set when one is
 * none of them. */
static Values *
read_values(PyObject *columns, Py_ssize_t rows)
{
    PyObject *ndarray = loaded_ndarray();
    if (ndarray == NULL && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(columns);
    Values *values = PyMem_RawCalloc((size_t)(count ? count : 1), sizeof(Values));
    if (values == NULL) {
        Py_XDECREF(ndarray);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t at = 0; at < count; at++) {
        PyObject *column = PyTuple_GET_ITEM(columns, at);
        if (PyList_CheckExact(column)) {
            if (PyList_GET_SIZE(column) != rows) {
                PyErr_Format(PyExc_ValueError, "column %zd has %zd rows, not %zd", at,
                             PyList_GET_SIZE(column), rows);
                Py_XDECREF(ndarray);
                release_values(values, at);
                return NULL;
            }
            values[at].objects = column;
            continue;
        }
        values[at].items = object_array_items(column, rows, ndarray);
        if (values[at].items != NULL) {
            continue;
        }
        if (PyObject_GetBuffer(column, &values[at].buffer,
                               PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
            Py_XDECREF(ndarray);
            release_values(values, at);
            return NULL;
        }
        values[at].format = buffer_kind(&values[at].buffer);
        Py_ssize_t length = values[at].buffer.itemsize
                            ? values[at].buffer.len / values[at].buffer.itemsize : -1;
        if (values[at].format == 0 || values[at].buffer.ndim != 1 || length != rows) {
            PyErr_Format(PyExc_ValueError, "column %zd is not a list, an array of objects "
                         "or a buffer of %zd numbers", at, rows);
            Py_XDECREF(ndarray);
            release_values(values, at + 1);
            return NULL;
        }
    }
    Py_XDECREF(ndarray);
    return values;
}

/* Rows are filled a block at a time, column by column within a block: each column's
 * values are then read in the order they lie in memory (text objects that Arrow made
 * column by column), while the block's dicts stay in cache. Filled row by row, each
 * row would read one value from every column, each read a likely cache miss on a
 * table of many columns. */
#define BLOCK_ROWS 256

/* The columns of each pattern as C indices: pattern ``p``'s are
 * ``columns[starts[p]:starts[p + 1]]``, in order. */
typedef struct {
    Py_ssize_t *starts;
    Py_ssize_t *columns;
} Patterns;

static void
free_patterns(Patterns *patterns)
{
    PyMem_RawFree(patterns->starts);
    PyMem_RawFree(patterns->columns);
}

/* ``pattern_columns`` (a tuple of column numbers per pattern, each pattern's numbers
 * increasing, so that a row has at most one cell per column) checked and read into
 * ``patterns``, and per pattern a dict of its keys (in column order) to None, which
 * each row of the pattern copies and fills: a copy of a dict of the right size takes
 * its keys as they are, where setting each key in a new dict would grow it step by
 * step. Returns the list of templates (None for a pattern of no column), or NULL
 * with an exception set; free_patterns frees ``patterns`` either way. */
static PyObject *
read_patterns(PyObject *names, PyObject *pattern_columns, Py_ssize_t width,
              Patterns *patterns)
{
    Py_ssize_t count = PyTuple_GET_SIZE(pattern_columns), total = 0;
    for (Py_ssize_t at = 0; at < count; at++) {
        PyObject *present = PyTuple_GET_ITEM(pattern_columns, at);
        if (!PyTuple_CheckExact(present)) {
            PyErr_SetString(PyExc_TypeError, "each pattern's columns must be a tuple");
            return NULL;
        }
        total += PyTuple_GET_SIZE(present);
    }
    patterns->starts = PyMem_RawMalloc((size_t)(count + 1) * sizeof(Py_ssize_t));
    patterns->columns = PyMem_RawMalloc((size_t)(total ? total : 1) * sizeof(Py_ssize_t));
    if (patterns->starts == NULL || patterns->columns == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    PyObject *templates = PyList_New(count);
    if (templates == NULL) {
        return NULL;
    }
    Py_ssize_t filled = 0;
    for (Py_ssize_t at = 0; at < count; at++) {
        PyObject *present = PyTuple_GET_ITEM(pattern_columns, at);
        patterns->starts[at] = filled;
        PyObject *template = PyTuple_GET_SIZE(present) ? PyDict_New() : Py_NewRef(Py_None);
        if (template == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(templates, at, template);
        for (Py_ssize_t slot = 0; slot < PyTuple_GET_SIZE(present); slot++) {
            Py_ssize_t column = PyLong_AsSsize_t(PyTuple_GET_ITEM(present, slot));
            if (column == -1 && PyErr_Occurred()) {
                goto fail;
            }
            if (column < 0 || column >= width) {
                PyErr_Format(PyExc_ValueError, "column %zd is not one of %zd", column, width);
                goto fail;
            }
            if (slot > 0 && column <= patterns->columns[filled - 1]) {
                PyErr_Format(PyExc_ValueError, "pattern %zd's columns are not increasing", at);
                goto fail;
            }
            patterns->columns[filled++] = column;
            if (PyDict_SetItem(template, PyTuple_GET_ITEM(names, column), Py_None) < 0) {
                goto fail;
            }
        }
    }
    patterns->starts[count] = filled;
    return templates;
fail:
    Py_DECREF(templates);
    return NULL;
}

/* Scratch for one block: its (row, column) cells ordered by column, then row. */
typedef struct {
    Py_ssize_t *column_starts; /* width + 1 */
    Py_ssize_t *rows;          /* the block's cells' rows, column by column */
} BlockCells;

/* Order the cells of rows [first, last) by column; ``column_starts`` says where each
 * column's rows begin in ``rows``. */
static void
order_cells(BlockCells *cells, const Patterns *patterns, const int64_t *pattern_of,
            Py_ssize_t width, Py_ssize_t first, Py_ssize_t last)
{
    Py_ssize_t *starts = cells->column_starts;
    memset(starts, 0, (size_t)(width + 1) * sizeof(Py_ssize_t));
    for (Py_ssize_t row = first; row < last; row++) {
        int64_t pattern = pattern_of[row];
        for (Py_ssize_t at = patterns->starts[pattern]; at < patterns->starts[pattern + 1];
             at++) {
            starts[patterns->columns[at] + 1]++;
        }
    }
    for (Py_ssize_t column = 0; column < width; column++) {
        starts[column + 1] += starts[column];
    }
    /* Column c's next free place is kept in starts[c + 1]: shifted up by one, each
     * column's begin; once its rows are placed, the begin of the column after it. */
    for (Py_ssize_t column = width; column > 0; column--) {
        starts[column] = starts[column - 1];
    }
    for (Py_ssize_t row = first; row < last; row++) {
        int64_t pattern = pattern_of[row];
        for (Py_ssize_t at = patterns->starts[pattern]; at < patterns->starts[pattern + 1];
             at++) {
            cells->rows[starts[patterns->columns[at] + 1]++] = row;
        }
    }
}

/* The dicts of rows [first, last): each a copy of its pattern's template (None for a
 * pattern of no column), stored in ``result``, then filled column by column. */
static int
fill_block(PyObject *result, PyObject *templates, const int64_t *pattern_of,
           const Patterns *patterns, BlockCells *cells, PyObject *names, Values *values,
           Py_ssize_t width, Py_ssize_t first, Py_ssize_t last)
{
    for (Py_ssize_t row = first; row < last; row++) {
        PyObject *template = PyList_GET_ITEM(templates, pattern_of[row]);
        PyObject *dict = template == Py_None ? Py_NewRef(Py_None) : PyDict_Copy(template);
        if (dict == NULL) {
            return -1;
        }
        PyList_SET_ITEM(result, row, dict);
    }
    order_cells(cells, patterns, pattern_of, width, first, last);
    for (Py_ssize_t column = 0; column < width; column++) {
        PyObject *name = PyTuple_GET_ITEM(names, column);
        for (Py_ssize_t at = cells->column_starts[column];
             at < cells->column_starts[column + 1]; at++) {
            Py_ssize_t row = cells->rows[at];
            PyObject *value = value_at(&values[column], row);
            if (value == NULL) {
                return -1;
            }
            int failed = PyDict_SetItem(PyList_GET_ITEM(result, row), name, value);
            Py_DECREF(value);
            if (failed < 0) {
                return -1;
            }
        }
    }
    return 0;
}

static PyObject *
row_dicts_of(PyObject *names, PyObject *columns, PyObject *patterns,
             PyObject *pattern_columns, Py_ssize_t width)
{
    for (Py_ssize_t at = 0; at < width; at++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(names, at))) {
            PyErr_SetString(PyExc_TypeError, "names must be str");
            return NULL;
        }
    }
    Py_buffer rows_of;
    if (PyObject_GetBuffer(patterns, &rows_of, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    PyObject *result = NULL, *templates = NULL;
    Values *values = NULL;
    Patterns laid = {NULL, NULL};
    BlockCells cells = {NULL, NULL};
    Py_ssize_t rows = rows_of.len / (Py_ssize_t)sizeof(int64_t);
    if (buffer_kind(&rows_of) != 'q' || rows_of.ndim != 1) {
        PyErr_SetString(PyExc_ValueError, "patterns must be one int64 per row");
        goto done;
    }
    const int64_t *pattern_of = (const int64_t *)rows_of.buf;
    Py_ssize_t pattern_count = PyTuple_GET_SIZE(pattern_columns);
    for (Py_ssize_t row = 0; row < rows; row++) {
        if (pattern_of[row] < 0 || pattern_of[row] >= pattern_count) {
            PyErr_Format(PyExc_ValueError, "row %zd has no pattern %lld", row,
                         (long long)pattern_of[row]);
            goto done;
        }
    }
    values = read_values(columns, rows);
    templates = values == NULL ? NULL : read_patterns(names, pattern_columns, width, &laid);
    if (templates == NULL) {
        goto done;
    }
    cells.column_starts = PyMem_RawMalloc((size_t)(width + 1) * sizeof(Py_ssize_t));
    cells.rows = PyMem_RawMalloc((size_t)BLOCK_ROWS * (size_t)(width ? width : 1)
                                 * sizeof(Py_ssize_t));
    if (cells.column_starts == NULL || cells.rows == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Each slot is set before the list is returned; after a failure, the slots not
     * reached yet are NULL, which the list's deallocation skips. Until then the list
     * is kept from the collector, so no finalizer can come upon its empty slots. */
    result = PyList_New(rows);
    if (result == NULL) {
        goto done;
    }
    PyObject_GC_UnTrack(result);
    for (Py_ssize_t first = 0; first < rows; first += BLOCK_ROWS) {
        Py_ssize_t last = first + BLOCK_ROWS < rows ? first + BLOCK_ROWS : rows;
        if (fill_block(result, templates, pattern_of, &laid, &cells, names, values, width,
                       first, last) < 0) {
            Py_CLEAR(result);
            goto done;
        }
    }
    PyObject_GC_Track(result);
done:
    PyMem_RawFree(cells.column_starts);
    PyMem_RawFree(cells.rows);
    free_patterns(&laid);
    Py_XDECREF(templates);
    if (values != NULL) {
        release_values(values, width);
    }
    PyBuffer_Release(&rows_of);
    return result;
}

/* A new tuple of ``list``'s items. The tuple is made before any item is read: making
 * it may start a collection whose finalizers could change the list, so the size is
 * checked again after, and nothing allocates between that check and the copy. */
static PyObject *
held_items(PyObject *list)
{
    Py_ssize_t count = PyList_GET_SIZE(list);
    PyObject *items = PyTuple_New(count);
    if (items == NULL) {
        return NULL;
    }
    if (PyList_GET_SIZE(list) != count) {
        Py_DECREF(items);
        PyErr_SetString(PyExc_RuntimeError, "a list changed while it was read");
        return NULL;
    }
    for (Py_ssize_t at = 0; at < count; at++) {
        PyTuple_SET_ITEM(items, at, Py_NewRef(PyList_GET_ITEM(list, at)));
    }
    return items;
}

static PyObject *
row_dicts(PyObject *module, PyObject *args)
{
    PyObject *names, *column_list, *patterns, *pattern_list;
    if (!PyArg_ParseTuple(args, "O!O!OO!:row_dicts", &PyTuple_Type, &names, &PyList_Type,
                          &column_list, &patterns, &PyList_Type, &pattern_list)) {
        return NULL;
    }
    Py_ssize_t width = PyTuple_GET_SIZE(names);
    /* Held as tuples: what a finalizer does to the caller's lists cannot reach them. */
    PyObject *columns = held_items(column_list);
    PyObject *pattern_columns = columns ? held_items(pattern_list) : NULL;
    if (pattern_columns == NULL) {
        Py_XDECREF(columns);
        return NULL;
    }
    if (PyTuple_GET_SIZE(columns) != width) {
        Py_DECREF(columns);
        Py_DECREF(pattern_columns);
        PyErr_SetString(PyExc_ValueError, "one column per name");
        return NULL;
    }
    PyObject *result = row_dicts_of(names, columns, patterns, pattern_columns, width);
    Py_DECREF(columns);
    Py_DECREF(pattern_columns);
    return result;
}

static PyMethodDef methods[] = {
    {"row_dicts", row_dicts, METH_VARARGS,
     "Row dicts again from columns: row_dicts(names, columns, patterns, pattern_columns)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_native_dicts",
    "Attribute dicts made again from typed columns.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__native_dicts(void)
{
    return PyModule_Create(&module_definition);
}
