package android.content; public class Intent { public Intent(Context c, Class<?> cls) {} }
