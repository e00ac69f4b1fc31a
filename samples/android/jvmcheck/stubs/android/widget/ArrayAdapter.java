package android.widget; public class ArrayAdapter<T> implements SpinnerAdapter { public ArrayAdapter(android.content.Context c, int resource, java.util.List<T> objects) {} }
