package android.graphics; public final class Rect { public Rect(int l, int t, int r, int b) {} }
